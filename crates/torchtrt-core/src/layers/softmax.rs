//! Softmax and log-softmax along one axis.

use serde::{Deserialize, Serialize};

use super::{InferInput, LayerOp, TypeShape, normalize_axis, require_float};

/// `exp(x − max) / Σ exp(x − max)` along `axis` (its logarithm when `log`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Softmax {
    /// The axis, negative counting from the end.
    pub axis: i64,
    /// Produce log-softmax.
    pub log: bool,
}

impl LayerOp for Softmax {
    fn kind(&self) -> &'static str {
        "Softmax"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("Softmax", x.dtype)?;
        normalize_axis(self.axis, x.shape.len())?;
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
