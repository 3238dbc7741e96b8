//! Indices of the non-zero elements (ONNX `NonZero`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr};

use super::{InferInput, LayerOp, TypeShape, unknown_dim};
use crate::tensor::Tensor;

/// The indices of the non-zero elements of the input, as an i64 tensor
/// `[rank, count]` in row-major order of the elements (ONNX `NonZero`). The count depends
/// on the input's values: known at build time when the input is constant, else at run
/// time, when the runtime hands the input's value to the shape rule. Any dtype but bool
/// counts `x != 0` (NaN is non-zero); bool counts `true`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NonZero;

/// The number of non-zero elements of `t`.
pub fn count_non_zero(t: &Tensor) -> usize {
    let width = t.dtype().size();
    match t.dtype() {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            t.to_f64_vec().iter().filter(|&&v| v != 0.0).count()
        }
        DType::Bool => t.bytes().iter().filter(|&&b| b != 0).count(),
        _ => t
            .bytes()
            .chunks_exact(width)
            .filter(|e| e.iter().any(|&b| b != 0))
            .count(),
    }
}

impl LayerOp for NonZero {
    fn kind(&self) -> &'static str {
        "NonZero"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[0]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let count = match x.value {
            Some(v) => DimExpr::Const(count_non_zero(v) as i64),
            None => unknown_dim(),
        };
        let rank = DimExpr::Const(x.shape.len() as i64);
        Ok(vec![TypeShape::new(DType::I64, vec![rank, count])])
    }
}
