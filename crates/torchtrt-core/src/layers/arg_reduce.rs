//! Index of the largest or smallest element along an axis.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr};

use super::{InferInput, LayerOp, TypeShape, normalize_axis};

/// The i64 position of the maximum (`max`) or minimum along `axis` (ONNX `ArgMax` /
/// `ArgMin`). Among equal values the first wins, or the last with `select_last_index`.
/// NaN counts as larger and smaller than every number (numpy), so a NaN wins both.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ArgReduce {
    /// ArgMax, else ArgMin.
    pub max: bool,
    /// The reduced axis, negative counting from the end.
    pub axis: i64,
    /// Keep the reduced axis as size 1.
    pub keep_dims: bool,
    /// Ties go to the last position instead of the first.
    pub select_last_index: bool,
}

impl LayerOp for ArgReduce {
    fn kind(&self) -> &'static str {
        "ArgReduce"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if x.dtype == DType::Bool {
            return Err("ArgReduce is not defined for bool".into());
        }
        let axis = normalize_axis(self.axis, x.shape.len())?;
        if x.shape[axis].as_const() == Some(0) {
            return Err(format!("axis {} is empty", self.axis));
        }
        let mut shape = x.shape.to_vec();
        if self.keep_dims {
            shape[axis] = DimExpr::Const(1);
        } else {
            shape.remove(axis);
        }
        Ok(vec![TypeShape::new(DType::I64, shape)])
    }
}
