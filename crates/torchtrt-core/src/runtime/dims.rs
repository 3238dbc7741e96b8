//! Output dtypes and concrete shapes of one layer at run time, shared by every execution
//! context (host tensors here, device tensors in the CUDA backend).

use torchtrt_plugin_api::{DType, const_shape, format_shape, shape_values};

use crate::error::{Error, Result};
use crate::layers::InferInput;
use crate::network::Layer;
use crate::tensor::{Tensor, shape_i64};

/// The output dtypes and concrete shapes of `layer` for inputs of these dtypes, shapes and
/// (where known) values; an error names the layer when its rule fails, an output shape is
/// not concrete, or an output's size in bytes overflows.
pub fn concrete_dims(
    layer: &Layer,
    inputs: &[(DType, &[usize], Option<&Tensor>)],
) -> Result<Vec<(DType, Vec<usize>)>> {
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
    let op = layer.kind.op();
    let types = op.infer(&infer).map_err(|message| Error::Layer {
        layer: layer.name.clone(),
        kind: op.kind(),
        message,
    })?;
    types
        .iter()
        .map(|ty| {
            let execution = |message: String| Error::Execution {
                layer: layer.name.clone(),
                message,
            };
            let dims = shape_values(&ty.shape)
                .filter(|d| d.iter().all(|&x| x >= 0))
                .ok_or_else(|| {
                    execution(format!(
                        "output shape {} is not concrete",
                        format_shape(&ty.shape)
                    ))
                })?;
            let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            dims.iter()
                .try_fold(ty.dtype.size(), |a, &d| a.checked_mul(d))
                .ok_or_else(|| execution("output size overflows".into()))?;
            Ok((ty.dtype, dims))
        })
        .collect()
}
