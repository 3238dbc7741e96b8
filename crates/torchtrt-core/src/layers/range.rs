//! Arithmetic progressions (ONNX `Range`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, unknown_dim};
use crate::tensor::Tensor;

/// `out[i] = start + i·delta` for `i < max(⌈(limit − start) / delta⌉, 0)` (ONNX `Range`).
/// The three inputs are scalars (or one-element tensors) of one dtype, a float type, i64,
/// i32 or i16; their values decide the output's length. Float lengths and elements are
/// computed in f64 and elements rounded to the dtype; integer ones exactly. `delta = 0` is
/// an error.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Range;

/// The number of elements of the progression the three scalars describe.
pub fn range_len(start: &Tensor, limit: &Tensor, delta: &Tensor) -> Result<usize, String> {
    for (t, what) in [(start, "start"), (limit, "limit"), (delta, "delta")] {
        if t.numel() != 1 {
            return Err(format!("{what} must be a scalar, got {t}"));
        }
    }
    let n = match (start.to_i64_vec(), limit.to_i64_vec(), delta.to_i64_vec()) {
        (Some(s), Some(l), Some(d)) => {
            let (s, l, d) = (i128::from(s[0]), i128::from(l[0]), i128::from(d[0]));
            if d == 0 {
                return Err("delta is 0".into());
            }
            let diff = l - s;
            let inexact_positive = diff % d != 0 && (diff % d > 0) == (d > 0);
            let n = diff / d + i128::from(inexact_positive);
            n.max(0)
        }
        _ => {
            let (s, l, d) = (
                start.to_f64_vec()[0],
                limit.to_f64_vec()[0],
                delta.to_f64_vec()[0],
            );
            if d == 0.0 {
                return Err("delta is 0".into());
            }
            let n = ((l - s) / d).ceil();
            if !n.is_finite() {
                return Err(format!(
                    "start {s}, limit {l} and delta {d} give no finite length"
                ));
            }
            n.max(0.0) as i128
        }
    };
    i64::try_from(n)
        .map(|n| n as usize)
        .map_err(|_| format!("a range of {n} elements is too long"))
}

impl LayerOp for Range {
    fn kind(&self) -> &'static str {
        "Range"
    }
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[0, 1, 2]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let dtype = inputs[0].dtype;
        if !(dtype.is_float() || matches!(dtype, DType::I64 | DType::I32 | DType::I16)) {
            return Err(format!("Range is not defined for {dtype}"));
        }
        for (x, what) in inputs.iter().zip(["start", "limit", "delta"]) {
            let scalar = x.shape.iter().all(|d| d.as_const() == Some(1));
            if x.dtype != dtype || !scalar {
                return Err(format!(
                    "{what} must be a {dtype} scalar, got {}{}",
                    x.dtype,
                    format_shape(x.shape)
                ));
            }
        }
        let len = match (inputs[0].value, inputs[1].value, inputs[2].value) {
            (Some(s), Some(l), Some(d)) => DimExpr::Const(range_len(s, l, d)? as i64),
            _ => unknown_dim(),
        };
        Ok(vec![TypeShape::new(dtype, vec![len])])
    }
}
