//! Tensor layouts per edge. Members are the convolutions the backend runs channels last
//! ([`Backend::channels_last`]), the element-wise layers over rank-4 tensors (indifferent
//! to layout: broadcasting commutes with a permutation of all four dims) and the rank-4
//! reductions that keep their dims (a squeeze-and-excitation block's pooling: its axes are
//! permuted with the tensor), and the quantizations by one scale (element-wise) between
//! 8-bit convolutions the backend runs channels last; members joined by
//! their edges form groups. A group becomes channels last when it contains a convolution
//! and the reformats it then needs move no more elements, at the profile's optimum shapes,
//! than it spares: the input copies of convolutions that are [`ChannelsLast::Faster`] so,
//! and the network's own transposes at its edges. A `Transpose` to channels last of a
//! member's output is the member's channels-last output itself (the member writes into its
//! result and the transpose goes); a `Transpose` to channels first read by members is its
//! input seen channels last (members read that input, and the transpose goes when nothing
//! else reads it). That is how a channels-last normalisation between two depthwise
//! convolutions (ConvNeXt) loses its transposes. Elsewhere a reformat (a `Transpose`)
//! converts a tensor once where a member reads a channels-first tensor (constants whose
//! bytes do not move, such as `[1, C, 1, 1]` scales, are retyped instead), and back where
//! anything else reads a member's output. A tensor whose height and width (or channels)
//! are 1 is the same bytes either way, so its reformat is a `Reshape` (a view) and costs
//! nothing. Reformats nothing reads are left for `compact` to drop. The builder records the
//! reformats it inserted, which `inspect` counts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::Work;
use super::uses::Uses;
use crate::backend::{Backend, ChannelsLast};
use crate::layers::{
    ACTIVATION_INPUTS, Constant, LayerKind, Reduce, Reshape, Transpose, TypeShape, permuted,
    scalar_quantization, to_channels_first, to_channels_last,
};
use crate::network::{Layer, TensorId};
use crate::tensor::Tensor;
use torchtrt_plugin_api::DeviceKind;

/// What a layer is to the layout pass.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// Not a member: its tensors keep their layout.
    Out,
    /// A convolution the backend runs channels last; `saves` its own copy of the input.
    Conv { saves: bool },
    /// An element-wise layer whose inputs and output all have rank 4.
    Elementwise,
    /// A reduction of a rank-4 tensor that keeps its dims.
    Reduce,
    /// A quantization or dequantization of a rank-4 tensor by one scale and zero point:
    /// element-wise in its first input, the others scalars.
    Scalar,
}

fn role(work: &Work, i: usize, backend: &dyn Backend) -> Role {
    let layer = &work.layers[i];
    if work.devices[i] != backend.device() || layer.outputs.len() != 1 {
        return Role::Out;
    }
    let conv = |answer: ChannelsLast| match answer {
        ChannelsLast::No => Role::Out,
        ChannelsLast::Either => Role::Conv { saves: false },
        ChannelsLast::Faster => Role::Conv { saves: true },
    };
    match &layer.kind {
        LayerKind::Convolution(c) if !c.channels_last => {
            conv(backend.channels_last(c, &work.infer_inputs(&layer.inputs)))
        }
        LayerKind::QuantizedConvolution(q) if !q.conv.channels_last => {
            conv(backend.quantized_channels_last(q, &work.infer_inputs(&layer.inputs)))
        }
        LayerKind::Quantize(_) | LayerKind::Dequantize(_)
            if work.ty(layer.inputs[0]).shape.len() == 4
                && scalar_quantization(&work.infer_inputs(&layer.inputs)).is_some() =>
        {
            Role::Scalar
        }
        LayerKind::Elementwise(_) | LayerKind::Unary(_) | LayerKind::Activation(_)
            if layer
                .inputs
                .iter()
                .chain(&layer.outputs)
                .all(|&t| work.ty(t).shape.len() == 4) =>
        {
            Role::Elementwise
        }
        LayerKind::Reduce(r)
            if r.keep_dims
                && layer.inputs.len() == 1
                && work.ty(layer.inputs[0]).shape.len() == 4
                && r.resolved_axes(4).is_ok() =>
        {
            Role::Reduce
        }
        _ => Role::Out,
    }
}

/// The inputs of a member that share its output's layout.
fn layout_slots(layer: &Layer, role: Role) -> Vec<usize> {
    match role {
        Role::Out => Vec::new(),
        Role::Conv { .. } => ACTIVATION_INPUTS
            .into_iter()
            .filter(|&s| s < layer.inputs.len())
            .collect(),
        Role::Elementwise | Role::Reduce => (0..layer.inputs.len()).collect(),
        Role::Scalar => vec![0],
    }
}

/// Whether `layer` is a rank-4 `Transpose` to channels last (`to_last`) or first.
fn transposes_to(layer: &Layer, to_last: bool) -> bool {
    let perm = if to_last {
        to_channels_last(4)
    } else {
        to_channels_first(4)
    };
    matches!(&layer.kind, LayerKind::Transpose(t) if t.perm == perm)
}

/// The layers of `work` split into groups, and how each tensor crosses a group's edge.
struct Plan {
    roles: Vec<Role>,
    slots: Vec<Vec<usize>>,
    group: Vec<usize>,
    uses: Uses,
}

impl Plan {
    fn new(work: &Work, outputs: &[(String, TensorId)], backend: &dyn Backend) -> Plan {
        let n = work.layers.len();
        let roles: Vec<Role> = (0..n).map(|i| role(work, i, backend)).collect();
        let slots: Vec<Vec<usize>> = (0..n)
            .map(|i| layout_slots(&work.layers[i], roles[i]))
            .collect();
        let uses = Uses::new(work, outputs);
        let mut root: Vec<usize> = (0..n).collect();
        fn find(root: &mut [usize], mut i: usize) -> usize {
            while root[i] != i {
                root[i] = root[root[i]];
                i = root[i];
            }
            i
        }
        for (i, member_slots) in slots.iter().enumerate() {
            for &slot in member_slots {
                let t = work.layers[i].inputs[slot];
                if let Some(p) = uses.producer[t.index()].filter(|&p| roles[p] != Role::Out) {
                    let (a, b) = (find(&mut root, i), find(&mut root, p));
                    root[a] = b;
                }
            }
        }
        let group = (0..n).map(|i| find(&mut root, i)).collect();
        Plan {
            roles,
            slots,
            group,
            uses,
        }
    }

    fn member_of(&self, i: usize, g: usize) -> bool {
        self.roles[i] != Role::Out && self.group[i] == g
    }

    /// Whether `t` is produced by a member of group `g`.
    fn made_in(&self, t: TensorId, g: usize) -> bool {
        self.uses.producer[t.index()].is_some_and(|p| self.member_of(p, g))
    }

    /// Whether layer `i` reads `t` in group `g`'s layout.
    fn reads_in(&self, i: usize, slot: usize, g: usize) -> bool {
        self.member_of(i, g) && self.slots[i].contains(&slot)
    }

    /// The `Transpose` to channels first producing `t`, on the backend's device.
    fn entry_transpose(&self, work: &Work, t: TensorId, device: DeviceKind) -> Option<usize> {
        self.uses.producer[t.index()]
            .filter(|&p| work.devices[p] == device && transposes_to(&work.layers[p], false))
    }

    /// The first `Transpose` to channels last reading `y`, the output of member `i`: the
    /// member writes its channels-last result into that transpose's output.
    fn exit_transpose(&self, work: &Work, i: usize) -> Option<usize> {
        let y = work.layers[i].outputs[0];
        self.uses.readers[y.index()]
            .iter()
            .map(|&(r, _)| r)
            .find(|&r| work.devices[r] == work.devices[i] && transposes_to(&work.layers[r], true))
    }

    /// Which layers become channels last: every member of each group with a convolution
    /// whose reformats move no more elements than it spares.
    fn chosen(&self, work: &Work) -> Vec<bool> {
        let n = work.layers.len();
        let (mut cost, mut spared) = (vec![0u64; n], vec![0u64; n]);
        let mut has_conv = vec![false; n];
        let mut entered = HashSet::new();
        for i in (0..n).filter(|&i| self.roles[i] != Role::Out) {
            let g = self.group[i];
            if let Role::Conv { saves } = self.roles[i] {
                has_conv[g] = true;
                if saves {
                    spared[g] += elements(work, work.layers[i].inputs[0]);
                }
            }
            for &slot in &self.slots[i] {
                let t = work.layers[i].inputs[slot];
                if self.made_in(t, g) || !entered.insert((g, t)) {
                    continue;
                }
                if retyped_shape(work, t).is_some() {
                    continue;
                }
                if self.entry_transpose(work, t, work.devices[i]).is_some() {
                    let only_members = !self.uses.output[t.index()]
                        && self.uses.readers[t.index()]
                            .iter()
                            .all(|&(r, s)| self.reads_in(r, s, g));
                    if only_members {
                        spared[g] += elements(work, t);
                    }
                    continue;
                }
                if in_place(work, t, true).is_none() {
                    cost[g] += elements(work, t);
                }
            }
            let y = work.layers[i].outputs[0];
            let exit = self.exit_transpose(work, i);
            if exit.is_some() {
                spared[g] += elements(work, y);
            }
            let outside = self.uses.output[y.index()]
                || self.uses.readers[y.index()]
                    .iter()
                    .any(|&(r, s)| Some(r) != exit && !self.reads_in(r, s, g));
            if outside && in_place(work, y, false).is_none() {
                cost[g] += elements(work, y);
            }
        }
        (0..n)
            .map(|i| {
                let g = self.group[i];
                self.roles[i] != Role::Out && has_conv[g] && cost[g] <= spared[g]
            })
            .collect()
    }
}

/// Runs the groups of convolutions and element-wise layers that pay channels last.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)], backend: &dyn Backend) {
    let plan = Plan::new(work, outputs, backend);
    let convert = plan.chosen(work);
    if !convert.contains(&true) {
        return;
    }
    let mut exits: HashMap<usize, TensorId> = HashMap::new();
    let mut dropped = HashSet::new();
    let mut twin: HashMap<TensorId, TensorId> = HashMap::new();
    for i in (0..work.layers.len()).filter(|&i| convert[i]) {
        if let Some(e) = plan.exit_transpose(work, i) {
            exits.insert(i, work.layers[e].outputs[0]);
            dropped.insert(e);
        }
        for &slot in &plan.slots[i] {
            let t = work.layers[i].inputs[slot];
            if let Some(p) = plan.entry_transpose(work, t, work.devices[i]) {
                twin.insert(t, work.layers[p].inputs[0]);
            }
        }
    }
    let layers = std::mem::take(&mut work.layers);
    let devices = std::mem::take(&mut work.devices);
    for (i, (mut layer, device)) in layers.into_iter().zip(devices).enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        if !convert[i] {
            work.layers.push(layer);
            work.devices.push(device);
            continue;
        }
        for &slot in &plan.slots[i] {
            let t = layer.inputs[slot];
            let last = match twin.get(&t) {
                Some(&last) => last,
                None => {
                    let last = entry(work, t, device);
                    twin.insert(t, last);
                    last
                }
            };
            layer.inputs[slot] = last;
        }
        let y = layer.outputs[0];
        let y_last = match exits.get(&i) {
            Some(&u) => u,
            None => new_like(work, y, "channels_last", &to_channels_last),
        };
        match &mut layer.kind {
            LayerKind::Convolution(c) => c.channels_last = true,
            LayerKind::QuantizedConvolution(q) => q.conv.channels_last = true,
            LayerKind::Reduce(r) => r.axes = channels_last_axes(&r.axes),
            _ => {}
        }
        layer.outputs[0] = y_last;
        work.layers.push(layer);
        work.devices.push(device);
        reformat(work, y_last, Some(y), false, device);
        twin.insert(y, y_last);
    }
}

/// The axes of a rank-4 reduction (`axes`, as [`Reduce`] takes them, valid for rank 4) of
/// a tensor moved channels last; none (every axis) stays none.
fn channels_last_axes(axes: &[i64]) -> Vec<i64> {
    if axes.is_empty() {
        return Vec::new();
    }
    let perm = to_channels_last(4);
    let resolved = Reduce::resolve_axes(axes, 4).unwrap_or_default();
    let mut moved: Vec<i64> = resolved
        .iter()
        .filter_map(|&a| perm.iter().position(|&p| p == a))
        .map(|a| a as i64)
        .collect();
    moved.sort_unstable();
    moved
}

/// The channels-last form of `t` (not made by a `Transpose` to channels first), which a
/// member on `device` reads: a retyped constant or a new reformat.
fn entry(work: &mut Work, t: TensorId, device: DeviceKind) -> TensorId {
    let retyped = retyped_shape(work, t).and_then(|last| {
        let value = work.tensors[t.index()].value.as_ref()?;
        Tensor::from_bytes(value.dtype(), &last, value.bytes()).ok()
    });
    if let Some(value) = retyped {
        let out = new_like(work, t, "channels_last", &to_channels_last);
        let value = Arc::new(value);
        work.tensors[out.index()].value = Some(value.clone());
        work.layers.push(Layer {
            name: work.tensors[out.index()].name.clone(),
            kind: LayerKind::Constant(Constant { value, slot: 0 }),
            inputs: Vec::new(),
            outputs: vec![out],
        });
        work.devices.push(DeviceKind::Cpu);
        return out;
    }
    reformat(work, t, None, true, device)
}

/// The channels-last shape of a constant `t` whose bytes that order leaves where they are
/// (its channels, or its height and width, are 1): such a constant is retyped, not moved.
fn retyped_shape(work: &Work, t: TensorId) -> Option<Vec<usize>> {
    let shape = work.tensors[t.index()].value.as_ref()?.shape();
    let still = shape.len() == 4 && (shape[1] == 1 || shape[2] * shape[3] == 1);
    still.then(|| permuted(shape, &to_channels_last(4)))
}

/// The `Reshape` dims that take `t` to channels last (`to_last`) or first without moving
/// its bytes: its height and width are both 1 (a squeeze-and-excitation block's pooled
/// tensor and gate) or its channels are, and the dims after the batch are known. A reshape
/// is a view, so such a reformat costs nothing.
fn in_place(work: &Work, t: TensorId, to_last: bool) -> Option<Vec<i64>> {
    let shape = &work.ty(t).shape;
    if shape.len() != 4 {
        return None;
    }
    let (perm, channels) = match to_last {
        true => (to_channels_last(4), 1),
        false => (to_channels_first(4), 3),
    };
    let one = |d: usize| shape[d].as_const() == Some(1);
    let spatial: Vec<usize> = (1..4).filter(|&d| d != channels).collect();
    if !one(channels) && !spatial.iter().all(|&d| one(d)) {
        return None;
    }
    let mut dims = vec![0];
    for d in permuted(shape, &perm).iter().skip(1) {
        dims.push(d.as_const()?);
    }
    Some(dims)
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
    device: DeviceKind,
) -> TensorId {
    let (perm_of, suffix): (&dyn Fn(usize) -> Vec<usize>, _) = if to_last {
        (&to_channels_last, "channels_last")
    } else {
        (&to_channels_first, "channels_first")
    };
    let out = into.unwrap_or_else(|| new_like(work, t, suffix, perm_of));
    let named = if to_last { t } else { out };
    let name = format!("{}/reformat_{suffix}", work.tensors[named.index()].name);
    let kind = match in_place(work, t, to_last) {
        Some(dims) => LayerKind::Reshape(Reshape::new(dims)),
        None => LayerKind::Transpose(Transpose {
            perm: perm_of(work.ty(t).shape.len()),
        }),
    };
    work.reformats.insert(name.clone());
    work.layers.push(Layer {
        name,
        kind,
        inputs: vec![t],
        outputs: vec![out],
    });
    work.devices.push(device);
    out
}
