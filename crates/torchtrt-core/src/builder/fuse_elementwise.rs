//! Element-wise fusion: groups of `Elementwise`/`Unary`/`Activation`/`Cast` layers on a
//! backend that asks for it ([`Backend::fuses_elementwise`]) become one [`Fused`] layer when
//! every intermediate result is read only inside the group (chains, and small trees such as
//! an exported Gelu `x·0.5·(1 + erf(x/√2))`). Shapes stay symbolic: the fused layer's rule
//! is its steps' rules, so dynamic shapes and broadcasts work as before.

use torchtrt_plugin_api::{DType, DeviceKind};

use super::Work;
use super::uses::Uses;
use crate::backend::Backend;
use crate::layers::{Fused, FusedOperand, FusedStep, LayerKind, fusible_kind};
use crate::network::{Layer, TensorId};

/// Most inputs one fused layer reads (each is a pointer and a stride set in its kernel).
const MAX_INPUTS: usize = 8;

/// Most steps in one fused layer (bounds the generated kernel's size).
const MAX_STEPS: usize = 32;

/// Replaces fusible groups of `work`'s layers with [`Fused`] layers, each at the place of
/// its last member; members before it are left unread, for `compact` to drop.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)], backend: &dyn Backend) {
    if !backend.fuses_elementwise() {
        return;
    }
    let uses = Uses::new(work, outputs);
    let fusible: Vec<bool> = (0..work.layers.len())
        .map(|i| fusible_layer(work, i, backend.device()))
        .collect();
    let mut group: Vec<Option<usize>> = vec![None; work.layers.len()];
    let mut members: Vec<Vec<usize>> = Vec::new();
    for i in 0..work.layers.len() {
        if !fusible[i] {
            continue;
        }
        let g = members.len();
        members.push(vec![i]);
        group[i] = Some(g);
        while let Some(p) = mergeable(work, &members[g], &uses, g, &group) {
            let other = group[p].unwrap_or(g);
            let taken = std::mem::take(&mut members[other]);
            let mut merged = members[g].clone();
            merged.extend(&taken);
            merged.sort_unstable();
            if merged.len() > MAX_STEPS || external_inputs(work, &merged).len() > MAX_INPUTS {
                members[other] = taken;
                break;
            }
            for &m in &taken {
                group[m] = Some(g);
            }
            members[g] = merged;
        }
    }
    for list in members.iter().filter(|m| m.len() > 1) {
        let last = list[list.len() - 1];
        let inputs = external_inputs(work, list);
        let position = |t: TensorId| inputs.iter().position(|&x| x == t);
        let steps = list
            .iter()
            .map(|&m| {
                let layer = &work.layers[m];
                let operands = layer
                    .inputs
                    .iter()
                    .map(
                        |&t| match list.iter().position(|&k| work.layers[k].outputs[0] == t) {
                            Some(k) => FusedOperand::Step(k as u32),
                            None => FusedOperand::Input(position(t).unwrap_or(0) as u32),
                        },
                    )
                    .collect();
                FusedStep {
                    kind: layer.kind.clone(),
                    operands,
                }
            })
            .collect();
        let fused = Fused {
            inputs: inputs.len() as u32,
            steps,
        };
        let layer = &mut work.layers[last];
        *layer = Layer {
            name: format!("{} (fused {})", layer.name, list.len()),
            kind: LayerKind::Fused(fused),
            inputs,
            outputs: layer.outputs.clone(),
        };
    }
}

/// Whether layer `i` may join a group: a fusible kind on the backend's device, with float
/// inputs and output.
fn fusible_layer(work: &Work, i: usize, device: DeviceKind) -> bool {
    let layer = &work.layers[i];
    let float = |t: &TensorId| {
        matches!(
            work.tensors[t.index()].ty.as_ref().map(|ty| ty.dtype),
            Some(DType::F32 | DType::F16 | DType::BF16)
        )
    };
    work.devices[i] == device
        && fusible_kind(&layer.kind)
        && layer.outputs.len() == 1
        && layer.inputs.iter().all(float)
        && layer.outputs.iter().all(float)
}

/// A layer of another group whose result this group reads and nothing outside it does.
fn mergeable(
    work: &Work,
    list: &[usize],
    uses: &Uses,
    g: usize,
    group: &[Option<usize>],
) -> Option<usize> {
    external_inputs(work, list).into_iter().find_map(|t| {
        let p = uses.producer[t.index()]?;
        let other = group[p]?;
        let inside = uses
            .reader_layers(t)
            .all(|c| list.binary_search(&c).is_ok());
        (other != g && !uses.output[t.index()] && inside).then_some(p)
    })
}

/// The tensors the members read that no member produces, in first-use order.
fn external_inputs(work: &Work, list: &[usize]) -> Vec<TensorId> {
    let mut out: Vec<TensorId> = Vec::new();
    for &m in list {
        for &t in &work.layers[m].inputs {
            let inside = list.iter().any(|&k| work.layers[k].outputs[0] == t);
            if !inside && !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}
