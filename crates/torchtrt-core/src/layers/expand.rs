//! Broadcasting to a run-time shape (ONNX `Expand`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, const_shape};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, broadcast_shapes, unknown_dim};

/// Broadcasts the input against the shape given by input 1, a 1-D integer tensor (ONNX
/// `Expand`): the output shape is the numpy broadcast of the two shapes, so a 1 in the
/// shape keeps the input's dim and the output may have more dims than the input.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Expand;

impl LayerOp for Expand {
    fn kind(&self) -> &'static str {
        "Expand"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (x, s) = (&inputs[0], &inputs[1]);
        let what = "the shape input of Expand";
        let shape = match input_vector(what, s)? {
            Some(dims) => {
                if let Some(d) = dims.iter().find(|&&d| d < 0) {
                    return Err(format!("{what} has a negative dim {d}: {dims:?}"));
                }
                broadcast_shapes(x.shape, &const_shape(&dims))?
            }
            None => {
                let rank = x.shape.len().max(known_len(what, s)?);
                let lead = rank - x.shape.len();
                (0..rank)
                    .map(|i| match i.checked_sub(lead).map(|j| &x.shape[j]) {
                        Some(d) if d.as_const().is_some_and(|v| v != 1) => d.clone(),
                        _ => unknown_dim(),
                    })
                    .collect::<Vec<DimExpr>>()
            }
        };
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
