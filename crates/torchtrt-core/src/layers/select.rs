//! Element-wise choice between two tensors (ONNX `Where`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerOp, TypeShape, broadcast_shapes};

/// `out = condition ? x : y` element by element (ONNX `Where`): `condition` is bool, `x`
/// and `y` share a dtype, and the three shapes broadcast together numpy-style.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Select;

impl LayerOp for Select {
    fn kind(&self) -> &'static str {
        "Select"
    }
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
        if c.dtype != DType::Bool {
            return Err(format!("the condition must be bool, got {}", c.dtype));
        }
        if x.dtype != y.dtype {
            return Err(format!(
                "the two choices must share a dtype, got {} and {}",
                x.dtype, y.dtype
            ));
        }
        let shape = broadcast_shapes(&broadcast_shapes(c.shape, x.shape)?, y.shape)?;
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
