//! Testing floats for NaN and infinities (ONNX `IsNaN`, `IsInf`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerOp, TypeShape, require_float};

/// What [`ValueTest`] looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueTestKind {
    /// NaN.
    Nan,
    /// +∞ (when `positive`) and −∞ (when `negative`).
    Inf {
        /// Detect +∞.
        positive: bool,
        /// Detect −∞.
        negative: bool,
    },
}

impl ValueTestKind {
    /// Whether `v` passes the test.
    pub fn test(self, v: f64) -> bool {
        match self {
            ValueTestKind::Nan => v.is_nan(),
            ValueTestKind::Inf { positive, negative } => {
                (positive && v == f64::INFINITY) || (negative && v == f64::NEG_INFINITY)
            }
        }
    }
}

/// A bool tensor of the input's shape telling which elements pass the test (ONNX `IsNaN`,
/// `IsInf`); floating-point inputs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ValueTest {
    /// The test.
    pub test: ValueTestKind,
}

impl LayerOp for ValueTest {
    fn kind(&self) -> &'static str {
        "ValueTest"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("ValueTest", x.dtype)?;
        Ok(vec![TypeShape::new(DType::Bool, x.shape.to_vec())])
    }
}
