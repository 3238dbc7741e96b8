//! A transpose of a 4-D tensor's last two dims written through 3-D reshapes, as
//! `torch.export` writes `k.transpose(-2, -1)` of attention's key under a dynamic batch:
//! `Reshape(x, [-1, d2, d3])`, `Transpose([0, 2, 1])`, `Reshape(…, [d0, d1, d3, d2])`, the
//! reshapes' shapes computed from `Shape(x)` by `Slice` and `Concat`. Emitted as the one 4-D
//! `Transpose` it is, the tensors after it keep `x`'s dims instead of dims known only at run
//! time, and attention fusion finds the key's transpose.

use torchtrt_plugin_api::{DeviceKind, DimExpr};

use super::Work;
use crate::error::Result;
use crate::layers::{LayerKind, Transpose};
use crate::network::{Layer, TensorId};
use crate::shape_arith::{MOST_STEPS, dims_of};

/// The target dims of a `Reshape` of `inputs` (its shape input's, or its own).
fn target(work: &Work, kind: &LayerKind, inputs: &[TensorId]) -> Option<Vec<DimExpr>> {
    let LayerKind::Reshape(r) = kind else {
        return None;
    };
    let dims = match inputs.get(1) {
        Some(&shape) => dims_of(work, shape, MOST_STEPS)?,
        None => r.dims.iter().map(|&d| DimExpr::Const(d)).collect(),
    };
    let copies = dims.iter().any(|d| d.as_const() == Some(0));
    (r.allow_zero || !copies).then_some(dims)
}

/// Whether `got` are the dims `want`, where at most one of them may be `-1`.
fn are(got: &[DimExpr], want: &[&DimExpr]) -> bool {
    let inferred = got.iter().filter(|d| d.as_const() == Some(-1)).count();
    got.len() == want.len()
        && inferred <= 1
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.as_const() == Some(-1) || g == *w)
}

/// Replaces the `Reshape` layer `layer` (reading `inputs`) by a `Transpose` of the last two
/// dims when it ends the chain this module describes; `true` when it did.
pub(super) fn run(
    work: &mut Work,
    layer: &Layer,
    kind: &LayerKind,
    inputs: &[TensorId],
    device: DeviceKind,
) -> Result<bool> {
    let LayerKind::Reshape(_) = kind else {
        return Ok(false);
    };
    let Some(x) = source(work, kind, inputs) else {
        return Ok(false);
    };
    let kind = LayerKind::Transpose(Transpose {
        perm: vec![0, 1, 3, 2],
    });
    let types = work.infer(&layer.name, &kind, &[x])?;
    let transpose = Layer {
        name: layer.name.clone(),
        kind,
        inputs: vec![x],
        outputs: layer.outputs.clone(),
    };
    work.emit(transpose, types, device);
    Ok(true)
}

/// The 4-D tensor whose last two dims the reshape `kind` of `inputs` ends up swapping.
fn source(work: &Work, kind: &LayerKind, inputs: &[TensorId]) -> Option<TensorId> {
    let swapped = work.producer(*inputs.first()?)?;
    let LayerKind::Transpose(t) = &swapped.kind else {
        return None;
    };
    if t.perm != [0, 2, 1] {
        return None;
    }
    let merged = work.producer(swapped.inputs[0])?;
    let x = *merged.inputs.first()?;
    let d = &work.ty(x).shape;
    if d.len() != 4 || work.ty(inputs[0]).shape.len() != 3 {
        return None;
    }
    let first = target(work, &merged.kind, &merged.inputs)?;
    let last = target(work, kind, inputs)?;
    let merges = first.len() == 3 && first[0].as_const() == Some(-1) && first[1..] == d[2..];
    (merges && are(&last, &[&d[0], &d[1], &d[3], &d[2]])).then_some(x)
}
