//! Output dtypes and concrete shapes of one layer at run time, shared by every execution
//! context (host tensors here, device tensors in the CUDA backend).

use torchtrt_plugin_api::{DType, const_shape, format_shape, shape_values};

use crate::error::{Error, Result};
use crate::layers::{InferInput, LayerKind, TypeShape};
use crate::network::Layer;
use crate::tensor::{Tensor, shape_i64};

/// The output dtypes and concrete shapes of `layer` for inputs of these dtypes, shapes and
/// (where known) values; an error names the layer when its rule fails, an output shape is
/// not concrete, or an output's size in bytes overflows.
pub fn concrete_dims(
    layer: &Layer,
    inputs: &[(DType, &[usize], Option<&Tensor>)],
) -> Result<Vec<(DType, Vec<usize>)>> {
    let types = infer_concrete(&layer.kind, inputs).map_err(|message| Error::Layer {
        layer: layer.name.clone(),
        kind: layer.kind.op().kind(),
        message,
    })?;
    types
        .iter()
        .map(|ty| {
            concrete(ty).map_err(|message| Error::Execution {
                layer: layer.name.clone(),
                message,
            })
        })
        .collect()
}

/// The output types of a layer of `kind` for inputs of these dtypes, concrete shapes and
/// (where known) values.
pub(crate) fn infer_concrete(
    kind: &LayerKind,
    inputs: &[(DType, &[usize], Option<&Tensor>)],
) -> std::result::Result<Vec<TypeShape>, String> {
    let shapes: Vec<_> = inputs
        .iter()
        .map(|(_, s, _)| const_shape(&shape_i64(s)))
        .collect();
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|((dtype, _, value), shape)| InferInput {
            dtype: *dtype,
            shape,
            value: *value,
        })
        .collect();
    kind.op().infer(&infer)
}

/// The dtype and dims of `ty`; an error when its shape is not concrete or its size in bytes
/// overflows.
pub(crate) fn concrete(ty: &TypeShape) -> std::result::Result<(DType, Vec<usize>), String> {
    let dims = shape_values(&ty.shape)
        .filter(|d| d.iter().all(|&x| x >= 0))
        .ok_or_else(|| format!("output shape {} is not concrete", format_shape(&ty.shape)))?;
    let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    dims.iter()
        .try_fold(ty.dtype.size(), |a, &d| a.checked_mul(d))
        .ok_or("output size overflows")?;
    Ok((ty.dtype, dims))
}
