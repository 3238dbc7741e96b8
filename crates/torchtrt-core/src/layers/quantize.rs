//! Linear quantization of floats to 8-bit integers (ONNX `QuantizeLinear`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, format_shape};

use super::{InferInput, LayerOp, TypeShape, normalize_axis, require_float};

/// `y = saturate(round(x / scale) + zero_point)` into `to` (`I8`, `U8`, `I16` or `U16`),
/// rounding half to even. Inputs: `x` (float), `scale` (float, a scalar or, per axis, a vector of
/// `x.shape[axis]`), and an optional `zero_point` of `to` shaped like `scale` (zero when
/// absent).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Quantize {
    /// The axis a vector scale runs along, negative counting from the end.
    pub axis: i64,
    /// The integer type: `I8`, `U8`, `I16` or `U16`.
    pub to: DType,
}

/// The integer range of a quantized type: `I8`, `U8`, `I16` or `U16`.
pub fn quantized_range(dtype: DType) -> Option<(i32, i32)> {
    match dtype {
        DType::I8 => Some((-128, 127)),
        DType::U8 => Some((0, 255)),
        DType::I16 => Some((-32768, 32767)),
        DType::U16 => Some((0, 65535)),
        _ => None,
    }
}

/// `x` quantized with `scale` and `zero_point` into `[lo, hi]`: ONNX `QuantizeLinear` on one
/// element (round half to even; NaN goes to the zero point).
#[inline(always)]
pub fn quantize_value(x: f32, scale: f32, zero_point: i32, (lo, hi): (i32, i32)) -> i32 {
    let q = (x / scale).round_ties_even();
    let q = if q.is_nan() { 0.0 } else { q };
    (q.clamp(i32::MIN as f32, i32::MAX as f32) as i64 + i64::from(zero_point))
        .clamp(i64::from(lo), i64::from(hi)) as i32
}

/// The one scale (as f32: finite and non-zero) and zero point (0 when absent) of a quantize
/// or dequantize layer over `inputs` (`x`, `scale`, optional `zero_point`), when both are
/// constant scalars; `None` otherwise.
pub fn scalar_quantization(inputs: &[InferInput<'_>]) -> Option<(f32, i32)> {
    let [s] = inputs.get(1)?.value?.to_f64_vec()[..] else {
        return None;
    };
    let zero_point = match inputs.get(2) {
        Some(z) => match z.value?.to_i64_vec()?[..] {
            [z] => i32::try_from(z).ok()?,
            _ => return None,
        },
        None => 0,
    };
    let s = s as f32;
    (s.is_finite() && s != 0.0).then_some((s, zero_point))
}

/// Checks the `scale` and `zero_point` inputs of a quantize or dequantize layer on `x`:
/// scalars, or vectors of `x.shape[axis]` (per-axis); the zero point shaped like the scale.
pub(crate) fn check_scales(
    what: &str,
    axis: i64,
    inputs: &[InferInput<'_>],
    zero_point_dtype: DType,
) -> Result<(), String> {
    let (x, scale) = (&inputs[0], &inputs[1]);
    require_float(&format!("{what} scale"), scale.dtype)?;
    let scalar = scale.shape.iter().all(|d| d.as_const() == Some(1)) && scale.shape.len() <= 1;
    if !scalar {
        let a = normalize_axis(axis, x.shape.len())?;
        let fits = scale.shape.len() == 1
            && match (scale.shape[0].as_const(), x.shape[a].as_const()) {
                (Some(s), Some(d)) => s == d,
                _ => scale.shape[0] == x.shape[a],
            };
        if !fits {
            return Err(format!(
                "{what} scale {} is neither a scalar nor a vector of axis {axis} of {}",
                format_shape(scale.shape),
                format_shape(x.shape)
            ));
        }
    }
    if let Some(zp) = inputs.get(2) {
        if zp.dtype != zero_point_dtype {
            return Err(format!(
                "{what} zero point is {}, expected {zero_point_dtype}",
                zp.dtype
            ));
        }
        if zp.shape != scale.shape {
            return Err(format!(
                "{what} zero point {} and scale {} differ in shape",
                format_shape(zp.shape),
                format_shape(scale.shape)
            ));
        }
    }
    Ok(())
}

impl LayerOp for Quantize {
    fn kind(&self) -> &'static str {
        "Quantize"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("Quantize", x.dtype)?;
        if quantized_range(self.to).is_none() {
            return Err(format!(
                "Quantize produces I8, U8, I16 or U16, not {}",
                self.to
            ));
        }
        check_scales("Quantize", self.axis, inputs, self.to)?;
        Ok(vec![TypeShape::new(self.to, x.shape.to_vec())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_half_to_even_and_saturate() {
        let r = quantized_range(DType::I8).unwrap();
        assert_eq!(quantize_value(2.5, 1.0, 0, r), 2);
        assert_eq!(quantize_value(3.5, 1.0, 0, r), 4);
        assert_eq!(quantize_value(-2.5, 1.0, 0, r), -2);
        assert_eq!(quantize_value(1000.0, 0.5, 0, r), 127);
        assert_eq!(quantize_value(-1e30, 0.5, 3, r), -128);
        assert_eq!(quantize_value(f32::NAN, 0.5, 3, r), 3);
        let u = quantized_range(DType::U8).unwrap();
        assert_eq!(quantize_value(-1.0, 0.1, 10, u), 0);
        assert_eq!(quantize_value(0.5, 0.1, 10, u), 15);
        assert_eq!(quantize_value(f32::INFINITY, 0.1, 10, u), 255);
    }
}
