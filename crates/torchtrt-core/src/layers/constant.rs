//! A constant tensor (weights).

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use torchtrt_plugin_api::const_shape;

use super::{InferInput, LayerOp, TypeShape};
use crate::tensor::{Tensor, shape_i64};

/// Produces a fixed tensor. The value travels in the engine's aligned weights section; the
/// layer itself serializes only its slot there.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Constant {
    /// The value (restored from the weights section when an engine is loaded).
    #[serde(skip)]
    pub value: Arc<Tensor>,
    /// Index into the engine's weights, set when the engine is serialized.
    pub slot: u32,
}

impl Constant {
    /// A constant layer holding `value`.
    pub fn new(value: Tensor) -> Constant {
        Constant {
            value: Arc::new(value),
            slot: 0,
        }
    }
}

impl LayerOp for Constant {
    fn kind(&self) -> &'static str {
        "Constant"
    }
    fn arity(&self) -> (usize, usize) {
        (0, 0)
    }
    fn infer(&self, _: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        Ok(vec![TypeShape::new(
            self.value.dtype(),
            const_shape(&shape_i64(self.value.shape())),
        )])
    }
}
