//! Convolution of 8-bit integers with 32-bit accumulation.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::quantize::quantized_range;
use super::{Convolution, InferInput, LayerOp, TypeShape};

/// A [`Convolution`] of quantized operands: `x_q` (`I8` or `U8`) read as
/// `(x_q − input_zero_point) · input_scale`, and `w_q` (`I8`, `[M, C/groups, *K]`) as
/// `w_q · weight_scales[m]` per output channel. Products accumulate exactly in 32-bit
/// integers and are scaled to `dtype`; the optional float `bias [M]` and residual (third and
/// fourth inputs) and the convolution's activation apply as in [`Convolution`]. Padding reads
/// the zero point, which stands for 0. The builder makes it from a dequantized activation and
/// quantized weights feeding a convolution (explicit Q/DQ), or from calibrated ranges (INT8
/// builds).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QuantizedConvolution {
    /// Window, groups and activation; channels first unless its `channels_last` is set (the
    /// layout pass's choice: input, residual and output are then `[N, H, W, C]`).
    pub conv: Convolution,
    /// The scale of `x_q`.
    pub input_scale: f32,
    /// The value of `x_q` that stands for 0.
    pub input_zero_point: i32,
    /// One scale per output channel for `w_q` (symmetric: its zero point is 0).
    pub weight_scales: Vec<f32>,
    /// The float type of the bias, the residual and (unless [`Self::output`] quantizes it)
    /// the output.
    pub dtype: DType,
    /// Quantizes the output as it is written (after the activation): a following
    /// `Quantize` fused into the convolution.
    #[serde(default)]
    pub output: Option<OutputQuantization>,
}

/// How a [`QuantizedConvolution`] quantizes its output: `saturate(round(y / scale) +
/// zero_point)` into `dtype` (`I8` or `U8`), rounding half to even, as `Quantize` does.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputQuantization {
    /// `I8` or `U8`.
    pub dtype: DType,
    /// The scale.
    pub scale: f32,
    /// The value standing for 0.
    pub zero_point: i32,
}

impl OutputQuantization {
    /// Checks that the quantization is to 8 bits with a zero point in range and a finite,
    /// non-zero scale.
    pub fn check(&self) -> Result<(), String> {
        let range = quantized_range(self.dtype).filter(|_| self.dtype.size() == 1);
        if !range.is_some_and(|(lo, hi)| (lo..=hi).contains(&self.zero_point)) {
            return Err(format!(
                "output quantization to {} with zero point {} is not 8-bit",
                self.dtype, self.zero_point
            ));
        }
        if !(self.scale.is_finite() && self.scale != 0.0) {
            return Err(format!(
                "output scale {} must be finite and non-zero",
                self.scale
            ));
        }
        Ok(())
    }
}

impl LayerOp for QuantizedConvolution {
    fn kind(&self) -> &'static str {
        "QuantizedConvolution"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 4)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (x, w) = (&inputs[0], &inputs[1]);
        let Some((lo, hi)) = quantized_range(x.dtype) else {
            return Err(format!(
                "QuantizedConvolution reads I8 or U8, not {}",
                x.dtype
            ));
        };
        if w.dtype != DType::I8 {
            return Err(format!(
                "QuantizedConvolution weights must be I8, not {}",
                w.dtype
            ));
        }
        if !(lo..=hi).contains(&self.input_zero_point) {
            return Err(format!(
                "input zero point {} is outside {}'s range",
                self.input_zero_point, x.dtype
            ));
        }
        let scales = std::iter::once(&self.input_scale).chain(&self.weight_scales);
        if let Some(s) = scales.into_iter().find(|s| !s.is_finite() || **s == 0.0) {
            return Err(format!("scale {s} must be finite and non-zero"));
        }
        if !self.dtype.is_float() {
            return Err(format!(
                "QuantizedConvolution outputs floats, not {}",
                self.dtype
            ));
        }
        let m = w.shape.first().and_then(|d| d.as_const());
        if m != Some(self.weight_scales.len() as i64) {
            return Err(format!(
                "{} weight scales for {} output channels",
                self.weight_scales.len(),
                m.map_or("unknown".into(), |m| m.to_string())
            ));
        }
        let typed: Vec<InferInput<'_>> = inputs
            .iter()
            .map(|i| InferInput {
                dtype: self.dtype,
                value: None,
                ..*i
            })
            .collect();
        if let Some(extra) = inputs[2..].iter().find(|i| i.dtype != self.dtype) {
            return Err(format!(
                "bias and residual must be {}, got {}",
                self.dtype, extra.dtype
            ));
        }
        let mut out = self.conv.infer(&typed)?;
        if let Some(q) = self.output {
            q.check()?;
            out[0].dtype = q.dtype;
        }
        Ok(out)
    }
}
