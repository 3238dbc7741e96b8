//! What a context learns about one input-shape key on its first run: the output shapes of
//! every layer whose shapes follow from the input shapes alone, and the values of small
//! shape arithmetic, so later runs of the key infer nothing and allocate nothing.

use std::sync::Arc;

use super::io::RunInputs;
use super::value::{Host, Meta, Value};
use super::walk::SHAPE_TENSOR_ELEMENTS;
use crate::engine::EnginePlan;
use crate::network::Layer;
use crate::tensor::Tensor;

/// Most keys a context keeps plans for; runs of further keys infer every shape.
const MAX_KEYS: usize = 16;

/// The dtypes and shapes of a run's inputs, engine input order.
pub(crate) type Key = Vec<Meta>;

struct Plan {
    key: Key,
    /// Per layer: its output dtypes and shapes, when they follow from the key.
    dims: Vec<Option<Vec<Meta>>>,
    /// Per layer: its outputs, when they are small host values that follow from the key.
    values: Vec<Option<Vec<Arc<Tensor>>>>,
}

/// The plans of a context, and the one selected for the current run.
#[derive(Default)]
pub(crate) struct ShapePlans {
    plans: Vec<Plan>,
    current: Option<usize>,
}

/// Whether `inputs` have the dtypes and shapes of `key`.
pub(crate) fn key_matches(key: &Key, inputs: &(impl RunInputs + ?Sized)) -> bool {
    key.iter().enumerate().all(|(k, (dtype, shape))| {
        let (d, s) = inputs.meta(k);
        d == *dtype && s == shape.as_slice()
    })
}

/// The key of `inputs`.
pub(crate) fn key_of(n: usize, inputs: &(impl RunInputs + ?Sized)) -> Key {
    (0..n)
        .map(|k| {
            let (d, s) = inputs.meta(k);
            (d, s.to_vec())
        })
        .collect()
}

impl ShapePlans {
    /// Selects the plan of `inputs`' key, starting one for a new key while fewer than
    /// [`MAX_KEYS`] are kept.
    pub(crate) fn select(&mut self, plan: &EnginePlan, inputs: &(impl RunInputs + ?Sized)) {
        self.current = self.plans.iter().position(|p| key_matches(&p.key, inputs));
        if self.current.is_none() && self.plans.len() < MAX_KEYS {
            let n = plan.layers.len();
            self.plans.push(Plan {
                key: key_of(plan.inputs.len(), inputs),
                dims: vec![None; n],
                values: vec![None; n],
            });
            self.current = Some(self.plans.len() - 1);
        }
    }

    fn plan(&self) -> Option<&Plan> {
        self.current.and_then(|i| self.plans.get(i))
    }

    /// Layer `li`'s output dtypes and shapes for the current key, when known.
    pub(crate) fn dims(&self, li: usize) -> Option<&Vec<Meta>> {
        self.plan()?.dims.get(li)?.as_ref()
    }

    /// Layer `li`'s output values for the current key, when known.
    pub(crate) fn values(&self, li: usize) -> Option<&[Arc<Tensor>]> {
        self.plan()?.values.get(li)?.as_deref()
    }

    /// Records layer `li`'s output dtypes and shapes for the current key.
    pub(crate) fn keep_dims(&mut self, li: usize, dims: &[Meta]) {
        if let Some(p) = self.current.and_then(|i| self.plans.get_mut(i))
            && p.dims[li].is_none()
        {
            p.dims[li] = Some(dims.to_vec());
        }
    }

    /// Records the outputs of layer `li` for the current key when they follow from it and
    /// are small values on the host (turning them into shared values).
    pub(crate) fn keep_values(
        &mut self,
        li: usize,
        layer: &Layer,
        slots: &[Value],
        keyed: &[bool],
    ) {
        let Some(p) = self.current.and_then(|i| self.plans.get_mut(i)) else {
            return;
        };
        let keep = |t: &crate::network::TensorId| {
            let v = &slots[t.index()];
            keyed[t.index()]
                && v.shape.iter().product::<usize>() <= SHAPE_TENSOR_ELEMENTS
                && matches!(v.host, Host::Owned(_) | Host::Shared(_))
        };
        if p.values[li].is_some() || !layer.outputs.iter().all(keep) {
            return;
        }
        let values = layer
            .outputs
            .iter()
            .map(|t| match &slots[t.index()].host {
                Host::Shared(h) => h.clone(),
                Host::Owned(h) => Arc::new(h.clone()),
                _ => unreachable!("checked above"),
            })
            .collect();
        p.values[li] = Some(values);
    }
}
