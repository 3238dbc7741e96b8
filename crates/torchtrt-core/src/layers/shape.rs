//! A tensor's shape as a tensor (ONNX `Shape`).

use std::ops::Range;

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr};

use super::{InferInput, LayerOp, TypeShape};
use crate::tensor::Tensor;

/// The input's dims `start..end` as a 1-D i64 tensor (ONNX `Shape-15`): negative bounds
/// count from the end, both are clamped to `[0, rank]`, and `end ≤ start` gives an empty
/// tensor. The input's elements are never read, so with known dims the layer folds away.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Shape {
    /// First dim taken.
    pub start: i64,
    /// One past the last dim taken; `None` for the rank.
    pub end: Option<i64>,
}

impl Shape {
    /// The dims taken from an input of rank `rank`.
    pub fn dims(&self, rank: usize) -> Range<usize> {
        let r = rank as i64;
        let clamp = |v: i64| (if v < 0 { v.saturating_add(r) } else { v }).clamp(0, r) as usize;
        let start = clamp(self.start);
        let end = self.end.map_or(rank, clamp);
        start..end.max(start)
    }
}

impl LayerOp for Shape {
    fn kind(&self) -> &'static str {
        "Shape"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let n = self.dims(inputs[0].shape.len()).len() as i64;
        Ok(vec![TypeShape::new(DType::I64, vec![DimExpr::Const(n)])])
    }
    fn eval_from_shapes(&self, inputs: &[InferInput<'_>]) -> Option<Vec<Tensor>> {
        let shape = inputs.first()?.shape;
        let dims: Vec<i64> = shape[self.dims(shape.len())]
            .iter()
            .map(DimExpr::as_const)
            .collect::<Option<_>>()?;
        Some(vec![Tensor::from_slice(&[dims.len()], &dims).ok()?])
    }
}
