//! A tensor's element count as a tensor (ONNX `Size`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerOp, TypeShape};
use crate::tensor::Tensor;

/// The input's number of elements as an i64 scalar (ONNX `Size`). The input's elements are
/// never read, so with known dims the layer folds away.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Size;

impl LayerOp for Size {
    fn kind(&self) -> &'static str {
        "Size"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, _: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        Ok(vec![TypeShape::new(DType::I64, vec![])])
    }
    fn eval_from_shapes(&self, inputs: &[InferInput<'_>]) -> Option<Vec<Tensor>> {
        let n = inputs
            .first()?
            .shape
            .iter()
            .try_fold(1i64, |acc, d| acc.checked_mul(d.as_const()?))?;
        Some(vec![Tensor::scalar(n)])
    }
}
