//! Constant folding: a layer whose inputs are all constants is evaluated at build time on
//! the CPU backend and replaced by constants.

use std::sync::Arc;

use torchtrt_plugin_api::shape_values;

use super::quantize::QuantizedWeights;
use super::{BuildConfig, Work};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::layers::{Constant, LayerKind, TypeShape};
use crate::network::{Layer, TensorId};
use crate::tensor::Tensor;

/// Folds `layer` if it can; returns whether it did.
pub(crate) fn try_fold(
    work: &mut Work,
    cpu: &dyn Backend,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    types: &[TypeShape],
    config: &BuildConfig,
) -> Result<bool> {
    if matches!(kind, LayerKind::Constant(_)) || !kind.op().foldable() {
        return Ok(false);
    }
    if let Some(values) = kind.op().eval_from_shapes(&work.infer_inputs(inputs)) {
        emit_constants(work, layer, types, values);
        return Ok(true);
    }
    if inputs
        .iter()
        .any(|t| work.tensors[t.index()].value.is_none())
    {
        return Ok(false);
    }
    let Some(shapes) = types
        .iter()
        .map(|t| shape_values(&t.shape))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(false);
    };
    let elements = shapes.iter().try_fold(0u64, |sum, s| {
        let n = s
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(u64::try_from(d).ok()?))?;
        sum.checked_add(n)
    });
    if elements.is_none_or(|e| e > config.max_fold_elements as u64) {
        return Ok(false);
    }
    let Ok(kernel) = cpu.prepare(kind, &work.infer_inputs(inputs)) else {
        return Ok(false);
    };
    let values: Vec<Arc<Tensor>> = inputs
        .iter()
        .filter_map(|t| work.tensors[t.index()].value.clone())
        .collect();
    let refs: Vec<&Tensor> = values.iter().map(|v| v.as_ref()).collect();
    let mut outs: Vec<Tensor> = types
        .iter()
        .zip(&shapes)
        .map(|(t, s)| {
            let dims: Vec<usize> = s.iter().map(|&d| d as usize).collect();
            Tensor::zeros(t.dtype, &dims)
        })
        .collect();
    kernel
        .execute(&refs, &mut outs)
        .map_err(|message| Error::Execution {
            layer: layer.name.clone(),
            message: format!("while folding constants: {message}"),
        })?;
    let quantized = match kind {
        LayerKind::Dequantize(d) => QuantizedWeights::of_dequantize(
            &values[0],
            &values[1],
            values.get(2).map(|z| z.as_ref()),
            d.axis,
        ),
        _ => None,
    };
    emit_constants(work, layer, types, outs);
    work.tensors[layer.outputs[0].index()].quantized = quantized.map(Arc::new);
    Ok(true)
}

/// Replaces `layer` by one constant layer per output.
fn emit_constants(work: &mut Work, layer: &Layer, types: &[TypeShape], values: Vec<Tensor>) {
    let many = values.len() > 1;
    for (i, (value, ty)) in values.into_iter().zip(types).enumerate() {
        let name = if many {
            format!("{}:{i}", layer.name)
        } else {
            layer.name.clone()
        };
        work.emit(
            Layer {
                name,
                kind: LayerKind::Constant(Constant::new(value)),
                inputs: vec![],
                outputs: vec![layer.outputs[i]],
            },
            vec![ty.clone()],
            torchtrt_plugin_api::DeviceKind::Cpu,
        );
    }
}
