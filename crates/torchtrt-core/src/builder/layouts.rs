//! Tensor layouts per edge. A convolution the backend runs faster channels last
//! ([`Backend::prefers_channels_last`]) becomes channels last when it shares an edge with
//! another such convolution (one produces its input or residual, or reads its output): a
//! chain of them then passes its activations channels last from one to the next. A reformat
//! (a `Transpose`) converts a tensor once where a channels-last convolution reads a
//! channels-first tensor, and back where anything else reads a channels-last convolution's
//! output; reformats nothing reads are left for `compact` to drop. The builder records the
//! reformats it inserted, which `inspect` counts. A convolution with no such neighbour keeps
//! channels first: two reformats around it would cost more than it gains.

use std::collections::HashMap;

use super::Work;
use crate::backend::Backend;
use crate::layers::{
    LayerKind, Transpose, TypeShape, permuted, to_channels_first, to_channels_last,
};
use crate::network::{Layer, TensorId};

/// The inputs of a convolution that share its output's layout: `x` and the residual.
const ACTIVATIONS: [usize; 2] = [0, 3];

/// Gives the chains of convolutions `backend` prefers channels last channels-last edges.
pub(super) fn run(work: &mut Work, backend: &dyn Backend) {
    let candidate: Vec<bool> = work
        .layers
        .iter()
        .zip(&work.devices)
        .map(|(layer, &device)| match &layer.kind {
            LayerKind::Convolution(c) if !c.channels_last && device == backend.device() => {
                backend.prefers_channels_last(c, &work.infer_inputs(&layer.inputs))
            }
            _ => false,
        })
        .collect();
    let mut producer = vec![None; work.tensors.len()];
    for (i, layer) in work.layers.iter().enumerate() {
        for t in &layer.outputs {
            producer[t.index()] = Some(i);
        }
    }
    let mut linked = vec![false; work.layers.len()];
    for (i, layer) in work.layers.iter().enumerate() {
        if !candidate[i] {
            continue;
        }
        for &slot in &ACTIVATIONS {
            let from = layer.inputs.get(slot).and_then(|t| producer[t.index()]);
            if let Some(p) = from.filter(|&p| candidate[p]) {
                linked[i] = true;
                linked[p] = true;
            }
        }
    }
    if !linked.contains(&true) {
        return;
    }
    let layers = std::mem::take(&mut work.layers);
    let devices = std::mem::take(&mut work.devices);
    let mut channels_last: HashMap<TensorId, TensorId> = HashMap::new();
    for ((mut layer, device), link) in layers.into_iter().zip(devices).zip(linked) {
        if !link {
            work.layers.push(layer);
            work.devices.push(device);
            continue;
        }
        for &slot in &ACTIVATIONS {
            let Some(&t) = layer.inputs.get(slot) else {
                continue;
            };
            let last = match channels_last.get(&t) {
                Some(&last) => last,
                None => {
                    let last = reformat(work, t, None, true, device);
                    channels_last.insert(t, last);
                    last
                }
            };
            layer.inputs[slot] = last;
        }
        let y = layer.outputs[0];
        let y_last = new_like(work, y, "channels_last", &to_channels_last);
        if let LayerKind::Convolution(c) = &mut layer.kind {
            c.channels_last = true;
        }
        layer.outputs[0] = y_last;
        work.layers.push(layer);
        work.devices.push(device);
        reformat(work, y_last, Some(y), false, device);
        channels_last.insert(y, y_last);
    }
}

/// A new tensor named after `t` with `suffix`, typed as `t` permuted by `perm` of its rank.
fn new_like(
    work: &mut Work,
    t: TensorId,
    suffix: &str,
    perm: &dyn Fn(usize) -> Vec<usize>,
) -> TensorId {
    let ty = work.ty(t).clone();
    let name = format!("{}/{suffix}", work.tensors[t.index()].name);
    let out = work.new_tensor(name);
    let shape = permuted(&ty.shape, &perm(ty.shape.len()));
    work.tensors[out.index()].ty = Some(TypeShape::new(ty.dtype, shape));
    out
}

/// Emits a reformat of `t` to channels last (`to_last`) or first, into `into` or a new
/// tensor, and returns its output.
fn reformat(
    work: &mut Work,
    t: TensorId,
    into: Option<TensorId>,
    to_last: bool,
    device: torchtrt_plugin_api::DeviceKind,
) -> TensorId {
    let (perm_of, suffix): (&dyn Fn(usize) -> Vec<usize>, _) = if to_last {
        (&to_channels_last, "channels_last")
    } else {
        (&to_channels_first, "channels_first")
    };
    let out = into.unwrap_or_else(|| new_like(work, t, suffix, perm_of));
    let named = if to_last { t } else { out };
    let name = format!("{}/reformat_{suffix}", work.tensors[named.index()].name);
    let perm = perm_of(work.ty(t).shape.len());
    work.reformats.insert(name.clone());
    work.layers.push(Layer {
        name,
        kind: LayerKind::Transpose(Transpose { perm }),
        inputs: vec![t],
        outputs: vec![out],
    });
    work.devices.push(device);
    out
}
