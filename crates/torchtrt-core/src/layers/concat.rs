//! Concatenation along an axis.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::format_shape;

use super::{InferInput, LayerOp, TypeShape, normalize_axis};

/// Joins inputs of one dtype along `axis`; other dims must agree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Concat {
    /// The axis, negative counting from the end.
    pub axis: i64,
}

impl LayerOp for Concat {
    fn kind(&self) -> &'static str {
        "Concat"
    }
    fn arity(&self) -> (usize, usize) {
        (1, usize::MAX)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let first = &inputs[0];
        let axis = normalize_axis(self.axis, first.shape.len())?;
        let mut shape = first.shape.to_vec();
        for x in &inputs[1..] {
            if x.dtype != first.dtype || x.shape.len() != first.shape.len() {
                return Err(format!(
                    "cannot concatenate {}{} with {}{}",
                    first.dtype,
                    format_shape(first.shape),
                    x.dtype,
                    format_shape(x.shape)
                ));
            }
            for (i, (a, b)) in first.shape.iter().zip(x.shape).enumerate() {
                if i != axis
                    && let (Some(p), Some(q)) = (a.as_const(), b.as_const())
                    && p != q
                {
                    return Err(format!(
                        "concat inputs differ in dim {i}: {} vs {}",
                        format_shape(first.shape),
                        format_shape(x.shape)
                    ));
                }
            }
            shape[axis] = shape[axis].clone() + x.shape[axis].clone();
        }
        Ok(vec![TypeShape::new(first.dtype, shape)])
    }
}
