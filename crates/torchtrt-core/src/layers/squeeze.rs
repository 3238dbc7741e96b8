//! Removing dims of size 1 (ONNX `Squeeze`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, ShapeExpr, format_shape};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, normalize_axis, unknown_dim};

/// Removes the dims listed in `axes` (each must be 1), or with no axes every dim equal to 1
/// (ONNX `Squeeze`). An optional second input, a 1-D integer tensor (ONNX opset 13), gives
/// the axes instead of the field. Without axes every dim must be known at build time, since
/// a symbolic dim may or may not be 1. An empty axes list removes nothing. Elements are
/// copied unchanged.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Squeeze {
    /// The dims to remove, negative counting from the end; `None` for every dim of size 1.
    pub axes: Option<Vec<i64>>,
}

/// The shape left when `axes` (or every dim of size 1) are removed from `shape`.
pub fn squeeze_shape(shape: &[DimExpr], axes: Option<&[i64]>) -> Result<ShapeExpr, String> {
    let Some(axes) = axes else {
        if shape.iter().any(|d| d.as_const().is_none()) {
            return Err(format!(
                "squeezing {} without axes needs every dim known at build time",
                format_shape(shape)
            ));
        }
        return Ok(shape
            .iter()
            .filter(|d| d.as_const() != Some(1))
            .cloned()
            .collect());
    };
    let mut drop = vec![false; shape.len()];
    for &a in axes {
        let axis = normalize_axis(a, shape.len())?;
        if std::mem::replace(&mut drop[axis], true) {
            return Err(format!("axis {a} is repeated in {axes:?}"));
        }
        if let Some(d) = shape[axis].as_const()
            && d != 1
        {
            return Err(format!(
                "cannot squeeze axis {a} of {}: its size is {d}, not 1",
                format_shape(shape)
            ));
        }
    }
    Ok(shape
        .iter()
        .zip(drop)
        .filter(|(_, d)| !d)
        .map(|(s, _)| s.clone())
        .collect())
}

impl LayerOp for Squeeze {
    fn kind(&self) -> &'static str {
        "Squeeze"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let axes =
            match inputs.get(1) {
                None => self.axes.clone(),
                Some(a) => {
                    let what = "the axes input of Squeeze";
                    match input_vector(what, a)? {
                        Some(axes) => Some(axes),
                        None => {
                            let rank = x.shape.len().checked_sub(known_len(what, a)?).ok_or_else(
                                || {
                                    format!(
                                        "{what} lists more axes than {} has",
                                        format_shape(x.shape)
                                    )
                                },
                            )?;
                            return Ok(vec![TypeShape::new(x.dtype, vec![unknown_dim(); rank])]);
                        }
                    }
                }
            };
        let shape = squeeze_shape(x.shape, axes.as_deref())?;
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
