//! Output shapes for given input shapes, without running the engine: shape arithmetic is
//! evaluated on the host (shape-only layers, constants, kept values, small integer layers of
//! known inputs), everything else only inferred.

use std::sync::Arc;

use torchtrt_plugin_api::{DType, const_shape};

use super::dims::concrete_dims;
use super::value::Known;
use super::walk::{Walk, small};
use crate::backend::Placement;
use crate::error::{Error, Result};
use crate::layers::{InferInput, LayerKind};
use crate::tensor::{Tensor, shape_i64};

impl Walk {
    /// The outputs' shapes (engine output order) for inputs of these dtypes and shapes
    /// (engine input order, already checked); `Err` names the first layer whose output
    /// shapes depend on tensor values that are only known by running.
    pub(crate) fn output_shapes(&self, inputs: &[(DType, &[usize])]) -> Result<Vec<Vec<usize>>> {
        let plan = self.engine.plan();
        let mut known: Vec<Option<Known>> = vec![None; plan.tensor_names.len()];
        for (spec, (dtype, shape)) in plan.inputs.iter().zip(inputs) {
            known[spec.tensor.index()] = Some((*dtype, shape.to_vec(), None));
        }
        for (li, layer) in plan.layers.iter().enumerate() {
            if let LayerKind::Constant(c) = &layer.kind {
                known[layer.outputs[0].index()] = Some((
                    c.value.dtype(),
                    c.value.shape().to_vec(),
                    Some(c.value.clone()),
                ));
                continue;
            }
            if let Some(kept) = self.kept(li) {
                for (t, k) in layer.outputs.iter().zip(kept) {
                    known[t.index()] = Some(k);
                }
                continue;
            }
            let ins: Vec<&Known> = layer
                .inputs
                .iter()
                .map(|t| {
                    known[t.index()].as_ref().ok_or_else(|| Error::Execution {
                        layer: layer.name.clone(),
                        message: format!(
                            "input `{}` is not computed",
                            plan.tensor_names[t.index()]
                        ),
                    })
                })
                .collect::<Result<_>>()?;
            let outs = self.evaluate(li, &ins)?;
            for (t, k) in layer.outputs.iter().zip(outs) {
                known[t.index()] = Some(k);
            }
        }
        plan.outputs
            .iter()
            .map(|(name, t)| {
                known[t.index()]
                    .as_ref()
                    .map(|(_, s, _)| s.clone())
                    .ok_or_else(|| Error::Execution {
                        layer: name.clone(),
                        message: "output was not computed".into(),
                    })
            })
            .collect()
    }

    /// Layer `li`'s outputs: shapes, with values when they are shape arithmetic on known
    /// values.
    fn evaluate(&self, li: usize, ins: &[&Known]) -> Result<Vec<Known>> {
        let layer = &self.engine.plan().layers[li];
        let shapes: Vec<_> = ins.iter().map(|k| const_shape(&shape_i64(&k.1))).collect();
        let infer: Vec<InferInput<'_>> = ins
            .iter()
            .zip(&shapes)
            .map(|(k, s)| InferInput {
                dtype: k.0,
                shape: s,
                value: k.2.as_deref(),
            })
            .collect();
        if !matches!(layer.kind, LayerKind::Plugin(_))
            && let Some(values) = layer.kind.op().eval_from_shapes(&infer)
        {
            return Ok(values
                .into_iter()
                .map(|t| (t.dtype(), t.shape().to_vec(), Some(Arc::new(t))))
                .collect());
        }
        let described: Vec<(DType, &[usize], Option<&Tensor>)> = ins
            .iter()
            .map(|k| (k.0, k.1.as_slice(), k.2.as_deref()))
            .collect();
        let dims = concrete_dims(layer, &described).map_err(|e| Error::Execution {
            layer: layer.name.clone(),
            message: format!(
                "its output shapes cannot be known before the run (they depend on tensor values): {e}"
            ),
        })?;
        let integer = dims
            .iter()
            .all(|(d, _)| matches!(d, DType::I64 | DType::I32 | DType::Bool));
        let host_kernel = self.engine.kernel(li).and_then(|k| match k.placement() {
            Placement::Host => Some(k),
            Placement::Device => k.host_twin(),
        });
        let values = match host_kernel {
            Some(kernel) if integer && small(&dims) && ins.iter().all(|k| k.2.is_some()) => {
                let inputs: Vec<&Tensor> = ins.iter().filter_map(|k| k.2.as_deref()).collect();
                let mut outs: Vec<Tensor> =
                    dims.iter().map(|(d, s)| Tensor::zeros(*d, s)).collect();
                kernel
                    .execute(&inputs, &mut outs)
                    .map_err(|message| Error::Execution {
                        layer: layer.name.clone(),
                        message,
                    })?;
                outs.into_iter().map(|t| Some(Arc::new(t))).collect()
            }
            _ => vec![None; dims.len()],
        };
        Ok(dims
            .into_iter()
            .zip(values)
            .map(|((d, s), v)| (d, s, v))
            .collect())
    }
}
