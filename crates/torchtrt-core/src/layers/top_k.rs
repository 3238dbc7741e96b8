//! The `k` largest or smallest elements along an axis, with their indices.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr};

use super::scalar_input::scalar_input;
use super::{InferInput, LayerOp, TypeShape, normalize_axis, unknown_dim};

/// Selects the `k` largest (`largest`) or smallest elements along `axis`; `k` is the second
/// input, an i64 tensor of one element (ONNX `TopK`). Outputs the values and their i64
/// positions. Among equal values the lower index comes first; NaN counts as larger than
/// every number. The selection is in order (largest or smallest first) whether or not
/// `sorted` is set, which ONNX allows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TopK {
    /// The axis, negative counting from the end.
    pub axis: i64,
    /// Take the largest elements, else the smallest.
    pub largest: bool,
    /// Return the selection in order (always done).
    pub sorted: bool,
}

impl LayerOp for TopK {
    fn kind(&self) -> &'static str {
        "TopK"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn num_outputs(&self) -> usize {
        2
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if x.dtype == DType::Bool {
            return Err("TopK is not defined for bool".into());
        }
        let axis = normalize_axis(self.axis, x.shape.len())?;
        let k = scalar_input(&inputs[1], "k")?;
        let len = x.shape[axis].as_const();
        let dim = match k {
            Some(k) if k < 0 => return Err(format!("k = {k} is negative")),
            Some(k) if len.is_some_and(|n| k > n) => {
                return Err(format!(
                    "k = {k} exceeds the {} elements of axis {}",
                    x.shape[axis], self.axis
                ));
            }
            Some(k) => DimExpr::Const(k),
            None => unknown_dim(),
        };
        let mut shape = x.shape.to_vec();
        shape[axis] = dim;
        Ok(vec![
            TypeShape::new(x.dtype, shape.clone()),
            TypeShape::new(DType::I64, shape),
        ])
    }
}
