//! Gathering slices by index tuples (ONNX `GatherND`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape};

/// Gathers slices of `data` addressed by the tuples in the last axis of `indices` (ONNX
/// `GatherND`). With `b = batch_dims` leading axes shared by both inputs and `k` the length
/// of the last axis of `indices`, the output is
/// `indices.shape[..−1] ++ data.shape[b + k..]`: each tuple indexes axes `b..b + k` of its
/// batch's data. Indices are i64 or i32, negative counting from the end; one out of range
/// is an error naming it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GatherNd {
    /// Leading axes of `data` and `indices` that are batch axes.
    pub batch_dims: usize,
}

/// Checks the inputs of an N-D gather or scatter and returns `k`, the tuple length.
pub(crate) fn tuple_len(
    batch_dims: usize,
    data: &[DimExpr],
    indices: &[DimExpr],
    index_dtype: DType,
) -> Result<usize, String> {
    if !matches!(index_dtype, DType::I64 | DType::I32) {
        return Err(format!("indices must be i64 or i32, got {index_dtype}"));
    }
    let Some(last) = indices.last() else {
        return Err("indices must have rank ≥ 1".into());
    };
    let k = last
        .as_const()
        .and_then(|k| usize::try_from(k).ok())
        .ok_or_else(|| {
            format!(
                "the last axis of indices {} must be known at build time",
                format_shape(indices)
            )
        })?;
    if batch_dims >= indices.len() || batch_dims >= data.len() {
        return Err(format!(
            "batch_dims {batch_dims} must be less than the ranks of data {} and indices {}",
            format_shape(data),
            format_shape(indices)
        ));
    }
    if k < 1 || batch_dims + k > data.len() {
        return Err(format!(
            "index tuples of length {k} do not fit data {} after {batch_dims} batch axes",
            format_shape(data)
        ));
    }
    for (a, b) in data.iter().zip(indices).take(batch_dims) {
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const())
            && x != y
        {
            return Err(format!(
                "batch axes of data {} and indices {} differ",
                format_shape(data),
                format_shape(indices)
            ));
        }
    }
    Ok(k)
}

impl LayerOp for GatherNd {
    fn kind(&self) -> &'static str {
        "GatherNd"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (data, idx) = (&inputs[0], &inputs[1]);
        let k = tuple_len(self.batch_dims, data.shape, idx.shape, idx.dtype)?;
        let mut shape = idx.shape[..idx.shape.len() - 1].to_vec();
        shape.extend_from_slice(&data.shape[self.batch_dims + k..]);
        Ok(vec![TypeShape::new(data.dtype, shape)])
    }
}
