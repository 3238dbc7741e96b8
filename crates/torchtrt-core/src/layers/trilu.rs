//! Upper or lower triangle of the trailing matrices.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::format_shape;

use super::scalar_input::scalar_input;
use super::{InferInput, LayerOp, TypeShape};

/// Keeps the upper (`upper`) or lower triangle of each matrix in the last two dims and
/// zeroes the rest (ONNX `Trilu`): element `(i, j)` stays when `j − i ≥ k` (upper) or
/// `j − i ≤ k` (lower). `k` is the optional second input, an i64 scalar, default 0. Any
/// dtype.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trilu {
    /// Keep the upper triangle, else the lower.
    pub upper: bool,
}

impl LayerOp for Trilu {
    fn kind(&self) -> &'static str {
        "Trilu"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if x.shape.len() < 2 {
            return Err(format!(
                "Trilu needs an input of rank ≥ 2, got {}",
                format_shape(x.shape)
            ));
        }
        if let Some(k) = inputs.get(1) {
            scalar_input(k, "k")?;
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
