//! Matrix product of 8-bit integers with 32-bit accumulation.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, format_shape};

use super::quantize::quantized_range;
use super::{InferInput, LayerOp, OutputQuantization, TypeShape};

/// `a_q [..., M, K] · w_qᵀ` for quantized operands: `a_q` (`I8` or `U8`) read as `(a_q −
/// input_zero_point) · input_scale`, and `w_q` (`I8`, `[N, K]`: one row per output column,
/// as a linear layer stores it) as `w_q · weight_scales[n]`. Products accumulate exactly in
/// 32-bit integers and are scaled to `dtype`; an optional float `bias [N]` (third input) is
/// added. The builder makes it from a MatMul with constant weights whose input has a
/// calibrated range (INT8 builds).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QuantizedMatMul {
    /// The scale of `a_q`.
    pub input_scale: f32,
    /// The value of `a_q` that stands for 0.
    pub input_zero_point: i32,
    /// One scale per output column for `w_q` (symmetric: its zero point is 0).
    pub weight_scales: Vec<f32>,
    /// The float type of the bias and (unless [`Self::output`] quantizes it) the output.
    pub dtype: DType,
    /// Quantizes the output as it is written: a following `Quantize` fused in.
    #[serde(default)]
    pub output: Option<OutputQuantization>,
}

impl LayerOp for QuantizedMatMul {
    fn kind(&self) -> &'static str {
        "QuantizedMatMul"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (a, w) = (&inputs[0], &inputs[1]);
        let Some((lo, hi)) = quantized_range(a.dtype).filter(|_| a.dtype.size() == 1) else {
            return Err(format!("QuantizedMatMul reads I8 or U8, not {}", a.dtype));
        };
        if w.dtype != DType::I8 || w.shape.len() != 2 || a.shape.len() < 2 {
            return Err(format!(
                "QuantizedMatMul needs a [..., M, K] and I8 weights [N, K], got {}{} and {}{}",
                a.dtype,
                format_shape(a.shape),
                w.dtype,
                format_shape(w.shape)
            ));
        }
        if !(lo..=hi).contains(&self.input_zero_point) {
            return Err(format!(
                "input zero point {} is outside {}'s range",
                self.input_zero_point, a.dtype
            ));
        }
        let scales = std::iter::once(&self.input_scale).chain(&self.weight_scales);
        if let Some(s) = scales.into_iter().find(|s| !s.is_finite() || **s == 0.0) {
            return Err(format!("scale {s} must be finite and non-zero"));
        }
        if !self.dtype.is_float() {
            return Err(format!(
                "QuantizedMatMul outputs floats, not {}",
                self.dtype
            ));
        }
        let n = w.shape[0].as_const();
        if n != Some(self.weight_scales.len() as i64) {
            return Err(format!(
                "{} weight scales for weights {}",
                self.weight_scales.len(),
                format_shape(w.shape)
            ));
        }
        let k = &a.shape[a.shape.len() - 1];
        if let (Some(x), Some(y)) = (k.as_const(), w.shape[1].as_const())
            && x != y
        {
            return Err(format!(
                "QuantizedMatMul inner dimensions differ: {} · {}ᵀ",
                format_shape(a.shape),
                format_shape(w.shape)
            ));
        }
        if let Some(b) = inputs.get(2)
            && (b.dtype != self.dtype || b.shape.len() != 1 || b.shape[0].as_const() != n)
        {
            return Err(format!(
                "bias must be {}[{}], got {}{}",
                self.dtype,
                self.weight_scales.len(),
                b.dtype,
                format_shape(b.shape)
            ));
        }
        let mut shape = a.shape.to_vec();
        *shape
            .last_mut()
            .ok_or("QuantizedMatMul input has no dims")? = w.shape[0].clone();
        let dtype = match self.output {
            Some(q) => {
                q.check()?;
                q.dtype
            }
            None => self.dtype,
        };
        Ok(vec![TypeShape::new(dtype, shape)])
    }
}
