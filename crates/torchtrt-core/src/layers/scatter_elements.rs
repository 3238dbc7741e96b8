//! Element-wise scatter along an axis (ONNX `ScatterElements`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, format_shape};

use super::gather_elements::check_element_indices;
use super::{InferInput, LayerOp, TypeShape};

/// How `ScatterElements` combines an update with the element it lands on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScatterReduction {
    /// The update replaces the element.
    #[default]
    None,
    /// `element + update`
    Add,
    /// `element · update`
    Mul,
    /// `max(element, update)`
    Max,
    /// `min(element, update)`
    Min,
}

/// A copy of `data` in which each `updates[i₀…i_{r−1}]` is written to
/// `[i₀…indices[i₀…i_{r−1}]…i_{r−1}]`, the index replacing position `axis` (ONNX
/// `ScatterElements-18`). `indices` (i32 or i64, negative counting from the end) and
/// `updates` share a shape of the data's rank, no larger than the data's off `axis`.
/// Updates apply in row-major order, so with `None` the last of duplicate indices wins;
/// reductions need a numeric dtype (integers wrap). An index out of range is an error
/// naming it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScatterElements {
    /// The indexed axis, negative counting from the end.
    pub axis: i64,
    /// How updates combine with the data.
    pub reduction: ScatterReduction,
}

impl LayerOp for ScatterElements {
    fn kind(&self) -> &'static str {
        "ScatterElements"
    }
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (data, idx, upd) = (&inputs[0], &inputs[1], &inputs[2]);
        check_element_indices(self.axis, data.shape, idx.shape, idx.dtype)?;
        if upd.dtype != data.dtype {
            return Err(format!(
                "updates must have the data's dtype {}, got {}",
                data.dtype, upd.dtype
            ));
        }
        let differ =
            upd.shape.len() != idx.shape.len()
                || upd.shape.iter().zip(idx.shape).any(
                    |(u, i)| matches!((u.as_const(), i.as_const()), (Some(a), Some(b)) if a != b),
                );
        if differ {
            return Err(format!(
                "updates {} and indices {} must have one shape",
                format_shape(upd.shape),
                format_shape(idx.shape)
            ));
        }
        if self.reduction != ScatterReduction::None && data.dtype == DType::Bool {
            return Err(format!(
                "reduction {:?} is not defined for bool",
                self.reduction
            ));
        }
        Ok(vec![TypeShape::new(data.dtype, data.shape.to_vec())])
    }
}
