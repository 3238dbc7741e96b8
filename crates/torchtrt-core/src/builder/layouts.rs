//! Tensor layouts per edge. The convolutions the backend runs faster channels last
//! ([`Backend::prefers_channels_last`]: kept channels first, each would copy its input to
//! channels last itself) form groups joined by their edges (one produces another's input or
//! residual). A group becomes channels last when the reformats it then needs move fewer
//! elements, at the profile's optimum shapes, than its convolutions' own copies would: a
//! chain of them passes its activations channels last from one to the next. A reformat (a
//! `Transpose`) converts a tensor once where a channels-last convolution reads a
//! channels-first tensor, and back where anything else reads a channels-last convolution's
//! output; reformats nothing reads are left for `compact` to drop. The builder records the
//! reformats it inserted, which `inspect` counts.

use std::collections::{HashMap, HashSet};

use super::Work;
use crate::backend::Backend;
use crate::layers::{
    ACTIVATION_INPUTS as ACTIVATIONS, LayerKind, Transpose, TypeShape, permuted, to_channels_first,
    to_channels_last,
};
use crate::network::{Layer, TensorId};

/// Runs the groups of convolutions `backend` prefers channels last that pay channels last.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)], backend: &dyn Backend) {
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
    let convert = chosen(work, outputs, &candidate);
    if !convert.contains(&true) {
        return;
    }
    let layers = std::mem::take(&mut work.layers);
    let devices = std::mem::take(&mut work.devices);
    let mut channels_last: HashMap<TensorId, TensorId> = HashMap::new();
    for ((mut layer, device), convert) in layers.into_iter().zip(devices).zip(convert) {
        if !convert {
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

/// Which candidates become channels last: each group of candidates joined by their edges
/// whose entries (tensors it reads from outside) and exits (its outputs read outside or
/// marked as network outputs) hold no more elements than its convolutions' inputs.
fn chosen(work: &Work, outputs: &[(String, TensorId)], candidate: &[bool]) -> Vec<bool> {
    let n = work.layers.len();
    let mut producer = vec![None; work.tensors.len()];
    for (i, layer) in work.layers.iter().enumerate() {
        for t in &layer.outputs {
            producer[t.index()] = Some(i);
        }
    }
    let mut root: Vec<usize> = (0..n).collect();
    fn find(root: &mut [usize], mut i: usize) -> usize {
        while root[i] != i {
            root[i] = root[root[i]];
            i = root[i];
        }
        i
    }
    let activations = |i: usize| {
        ACTIVATIONS
            .iter()
            .filter_map(move |&slot| work.layers[i].inputs.get(slot).copied())
    };
    for i in (0..n).filter(|&i| candidate[i]) {
        for t in activations(i) {
            if let Some(p) = producer[t.index()].filter(|&p| candidate[p]) {
                let (a, b) = (find(&mut root, i), find(&mut root, p));
                root[a] = b;
            }
        }
    }
    let group: Vec<usize> = (0..n).map(|i| find(&mut root, i)).collect();
    let in_group =
        |t: TensorId, g: usize| producer[t.index()].is_some_and(|p| candidate[p] && group[p] == g);
    let mut outside: Vec<bool> = vec![false; work.tensors.len()];
    for (i, layer) in work.layers.iter().enumerate() {
        for (slot, t) in layer.inputs.iter().enumerate() {
            let inside = candidate[i] && ACTIVATIONS.contains(&slot) && in_group(*t, group[i]);
            outside[t.index()] |= !inside;
        }
    }
    for (_, t) in outputs {
        outside[t.index()] = true;
    }
    let mut copies = vec![0u64; n];
    let mut reformats = vec![0u64; n];
    let mut entered = HashSet::new();
    for i in (0..n).filter(|&i| candidate[i]) {
        let g = group[i];
        copies[g] += elements(work, work.layers[i].inputs[0]);
        for t in activations(i) {
            if !in_group(t, g) && entered.insert((g, t)) {
                reformats[g] += elements(work, t);
            }
        }
        let y = work.layers[i].outputs[0];
        if outside[y.index()] {
            reformats[g] += elements(work, y);
        }
    }
    (0..n)
        .map(|i| candidate[i] && reformats[group[i]] <= copies[group[i]])
        .collect()
}

/// Elements of `t` at the profile's optimum shapes (a dim not known there counts as 1).
fn elements(work: &Work, t: TensorId) -> u64 {
    work.ty(t)
        .shape
        .iter()
        .map(|d| d.eval(&|s| work.opt.get(s).copied()).unwrap_or(1).max(0) as u64)
        .fold(1u64, u64::saturating_mul)
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
