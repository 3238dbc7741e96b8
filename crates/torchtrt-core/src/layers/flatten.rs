//! Flatten to a matrix (ONNX `Flatten`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DimExpr;

use super::{InferInput, LayerOp, TypeShape};

/// Reshapes the input into the matrix `[d₀·…·d_{axis−1}, d_axis·…·d_{r−1}]` (ONNX
/// `Flatten`); `axis` is in `[−r, r]`, negative counting from the end. Elements are copied
/// unchanged.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Flatten {
    /// Where the second output dim starts.
    pub axis: i64,
}

impl LayerOp for Flatten {
    fn kind(&self) -> &'static str {
        "Flatten"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let r = x.shape.len() as i64;
        let axis = if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        };
        if !(0..=r).contains(&axis) {
            return Err(format!("axis {} is out of range for rank {r}", self.axis));
        }
        let (outer, inner) = x.shape.split_at(axis as usize);
        let product = |dims: &[DimExpr]| dims.iter().fold(DimExpr::Const(1), |a, d| a * d.clone());
        Ok(vec![TypeShape::new(
            x.dtype,
            vec![product(outer), product(inner)],
        )])
    }
}
