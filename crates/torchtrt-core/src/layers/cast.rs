//! Dtype conversion.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerOp, TypeShape};

/// Converts every element to `to` (floats to integers truncate toward zero, saturating;
/// to bool: non-zero is true).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cast {
    /// Target dtype.
    pub to: DType,
}

impl LayerOp for Cast {
    fn kind(&self) -> &'static str {
        "Cast"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        Ok(vec![TypeShape::new(self.to, inputs[0].shape.to_vec())])
    }
}
