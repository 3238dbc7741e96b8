//! Linear quantization to 8-bit integers (ONNX `QuantizeLinear`) and the per-axis scale
//! lookup it shares with dequantization.

use std::borrow::Cow;

use torchtrt_core::layers::{Quantize, normalize_axis, quantize_value, quantized_range};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_chunk;
use crate::tensor_access::{check_arity, check_output, words_mut};

const WHAT: &str = "Quantize";

struct QuantizeKernel {
    axis: i64,
    to: DType,
}

pub(super) fn prepare(
    layer: &Quantize,
    _inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(QuantizeKernel {
        axis: layer.axis,
        to: layer.to,
    }))
}

/// The values of a float tensor as f32 (borrowed when they are f32).
pub(crate) fn f32_values(t: &Tensor) -> Result<Cow<'_, [f32]>, String> {
    match t.dtype() {
        DType::F32 => t
            .as_slice::<f32>()
            .map(Cow::Borrowed)
            .map_err(|e| e.to_string()),
        d if d.is_float() => Ok(Cow::Owned(
            t.to_f64_vec().iter().map(|&v| v as f32).collect(),
        )),
        d => Err(format!("expected a float tensor, got {d}")),
    }
}

/// How the scale and zero point of a (de)quantize layer apply to `x`: one pair for every
/// element, or one per index of `axis`.
pub(crate) struct Scales {
    scale: Vec<f32>,
    zero_point: Vec<i32>,
    /// Elements per step of the axis (1 for a scalar scale, which then covers everything).
    inner: usize,
}

impl Scales {
    /// The scales of `inputs` (`x`, `scale`, optional `zero_point`) along `axis`.
    pub(crate) fn new(what: &str, axis: i64, inputs: &[&Tensor]) -> Result<Scales, String> {
        let (x, scale) = (inputs[0], inputs[1]);
        let values = f32_values(scale).map_err(|e| format!("{what} scale: {e}"))?;
        let zero_point: Vec<i32> = match inputs.get(2) {
            Some(zp) => zp
                .to_i64_vec()
                .ok_or_else(|| format!("{what}: zero point {zp} is not integer"))?
                .into_iter()
                .map(|v| v as i32)
                .collect(),
            None => vec![0; values.len()],
        };
        if zero_point.len() != values.len() {
            return Err(format!(
                "{what}: {} zero points for {} scales",
                zero_point.len(),
                values.len()
            ));
        }
        let inner = match values.len() {
            1 => x.numel().max(1),
            n => {
                let a = normalize_axis(axis, x.rank())?;
                if x.shape()[a] != n {
                    return Err(format!("{what}: {n} scales for axis {a} of {x}"));
                }
                x.shape()[a + 1..].iter().product()
            }
        };
        Ok(Scales {
            scale: values.into_owned(),
            zero_point,
            inner,
        })
    }

    /// The scale and zero point of element `i`.
    #[inline(always)]
    pub(crate) fn at(&self, i: usize) -> (f32, i32) {
        let k = (i / self.inner) % self.scale.len();
        (self.scale[k], self.zero_point[k])
    }
}

impl Kernel for QuantizeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=3, 1)?;
        let x = inputs[0];
        let scales = Scales::new(WHAT, self.axis, inputs)?;
        let values = f32_values(x).map_err(|e| format!("{WHAT} x: {e}"))?;
        let range = quantized_range(self.to).ok_or(WHAT)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.to, x.shape())?;
        let quantize = |start: usize, chunk: &mut [u8]| {
            for (j, o) in chunk.iter_mut().enumerate() {
                let (s, zp) = scales.at(start + j);
                *o = quantize_value(values[start + j], s, zp, range) as u8;
            }
        };
        for_each_chunk(words_mut::<u8>(out)?, quantize);
        Ok(())
    }
}
