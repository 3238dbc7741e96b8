//! Inserting dims of size 1 (ONNX `Unsqueeze`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, ShapeExpr};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, normalize_axis, unknown_dim};

/// Inserts a dim of size 1 at each of `axes`, which index the *output* (ONNX `Unsqueeze`):
/// negative axes count from the end of the output, repeats are errors. An optional second
/// input, a 1-D integer tensor (ONNX opset 13), gives the axes instead of the field.
/// Elements are copied unchanged.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Unsqueeze {
    /// Positions of the new dims in the output.
    pub axes: Vec<i64>,
}

/// `shape` with dims of size 1 inserted at `axes` (positions in the output).
pub fn unsqueeze_shape(shape: &[DimExpr], axes: &[i64]) -> Result<ShapeExpr, String> {
    let rank = shape.len() + axes.len();
    let mut new = vec![false; rank];
    for &a in axes {
        let axis = normalize_axis(a, rank)?;
        if std::mem::replace(&mut new[axis], true) {
            return Err(format!("axis {a} is repeated in {axes:?}"));
        }
    }
    let mut dims = shape.iter();
    Ok(new
        .into_iter()
        .map(|n| {
            if n {
                DimExpr::Const(1)
            } else {
                dims.next().cloned().unwrap_or(DimExpr::Const(1))
            }
        })
        .collect())
}

impl LayerOp for Unsqueeze {
    fn kind(&self) -> &'static str {
        "Unsqueeze"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let axes = match inputs.get(1) {
            None => self.axes.clone(),
            Some(a) => {
                let what = "the axes input of Unsqueeze";
                match input_vector(what, a)? {
                    Some(axes) => axes,
                    None => {
                        let rank = x.shape.len() + known_len(what, a)?;
                        return Ok(vec![TypeShape::new(x.dtype, vec![unknown_dim(); rank])]);
                    }
                }
            }
        };
        Ok(vec![TypeShape::new(
            x.dtype,
            unsqueeze_shape(x.shape, &axes)?,
        )])
    }
}
