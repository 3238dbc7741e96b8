//! Writing slices by index tuples (ONNX `ScatterND`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, format_shape};

use super::gather_nd::tuple_len;
use super::{InferInput, LayerOp, ScatterReduction, TypeShape};

/// A copy of `data` in which the slice addressed by each tuple in the last axis of
/// `indices` is replaced by (or, with a reduction, combined with) the matching slice of
/// `updates` (ONNX `ScatterND-18`). With `k` the tuple length, `updates` has the shape
/// `indices.shape[..−1] ++ data.shape[k..]`. Updates apply in row-major order, so with
/// `None` the last of duplicate tuples wins; reductions need a numeric dtype (integers
/// wrap). Indices are i64 or i32, negative counting from the end; one out of range is an
/// error naming it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ScatterNd {
    /// How updates combine with the data.
    pub reduction: ScatterReduction,
}

impl LayerOp for ScatterNd {
    fn kind(&self) -> &'static str {
        "ScatterNd"
    }
    fn arity(&self) -> (usize, usize) {
        (3, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (data, idx, upd) = (&inputs[0], &inputs[1], &inputs[2]);
        let k = tuple_len(0, data.shape, idx.shape, idx.dtype)?;
        if upd.dtype != data.dtype {
            return Err(format!(
                "updates must have the data's dtype {}, got {}",
                data.dtype, upd.dtype
            ));
        }
        let mut want = idx.shape[..idx.shape.len() - 1].to_vec();
        want.extend_from_slice(&data.shape[k..]);
        let differ =
            upd.shape.len() != want.len()
                || upd.shape.iter().zip(&want).any(
                    |(u, w)| matches!((u.as_const(), w.as_const()), (Some(a), Some(b)) if a != b),
                );
        if differ {
            return Err(format!(
                "updates {} must have the shape {} (indices {} over data {})",
                format_shape(upd.shape),
                format_shape(&want),
                format_shape(idx.shape),
                format_shape(data.shape)
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
