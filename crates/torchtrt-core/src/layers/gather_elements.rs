//! Element-wise gather along an axis (ONNX `GatherElements`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, normalize_axis};

/// `out[i₀…i_{r−1}] = data[i₀…indices[i₀…i_{r−1}]…i_{r−1}]`, the index replacing position
/// `axis` (ONNX `GatherElements`). `indices` (i32 or i64, negative counting from the end)
/// has the data's rank, dims no larger than the data's off `axis`, and the output's shape.
/// An index out of range is an error naming it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GatherElements {
    /// The indexed axis, negative counting from the end.
    pub axis: i64,
}

/// Checks that `indices` (of `idx_dtype`) fit `data` for an element-wise gather or scatter
/// along `axis`; returns the normalised axis.
pub(crate) fn check_element_indices(
    axis: i64,
    data: &[DimExpr],
    indices: &[DimExpr],
    idx_dtype: DType,
) -> Result<usize, String> {
    if !matches!(idx_dtype, DType::I64 | DType::I32) {
        return Err(format!("indices must be i32 or i64, got {idx_dtype}"));
    }
    if data.len() != indices.len() {
        return Err(format!(
            "indices {} must have the rank of the data {}",
            format_shape(indices),
            format_shape(data)
        ));
    }
    let axis = normalize_axis(axis, data.len())?;
    for (i, (d, n)) in data.iter().zip(indices).enumerate() {
        if i != axis
            && let (Some(d), Some(n)) = (d.as_const(), n.as_const())
            && n > d
        {
            return Err(format!(
                "indices {} exceed the data {} in dim {i}",
                format_shape(indices),
                format_shape(data)
            ));
        }
    }
    Ok(axis)
}

impl LayerOp for GatherElements {
    fn kind(&self) -> &'static str {
        "GatherElements"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (data, idx) = (&inputs[0], &inputs[1]);
        check_element_indices(self.axis, data.shape, idx.shape, idx.dtype)?;
        Ok(vec![TypeShape::new(data.dtype, idx.shape.to_vec())])
    }
}
