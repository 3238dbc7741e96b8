//! The heads' layout changes around a fused `Attention` folded into the layer: exported
//! attention splits each projection `[batch, seq, heads · head]` by a `Reshape` to
//! `[batch, seq, heads, head]` and a `Transpose` to `[batch, heads, seq, head]`, and joins the
//! output back by the inverse `Transpose` (then a `Reshape` of any shape). The attention
//! kernels read and write the `[batch, seq, heads · head]` layout as well (the layer's rank-3
//! form, by strides), so when all three operands come that way and only that `Transpose`
//! reads the output, the layer reads the projections itself and its output is joined
//! already: the `Transpose` becomes a `Reshape` to `[batch, seq, heads, head]`, a view. Four
//! transposed copies fewer per attention. The layers bypassed are left unread, for
//! `compact` to drop.

use torchtrt_plugin_api::DimExpr;

use super::Work;
use super::uses::Uses;
use crate::layers::{Attention, InferInput, LayerKind, Reshape, TypeShape};
use crate::network::TensorId;

/// The permutation between `[batch, heads, seq, head]` and `[batch, seq, heads, head]` (its
/// own inverse).
const SWAP_HEADS: [usize; 4] = [0, 2, 1, 3];

/// Whether `t` is `[d0, d1, d2 · d3]` of a `[d0, d1, d2, d3]` with a known `d2 · d3`.
fn joins(t: &TypeShape, split: &[DimExpr]) -> bool {
    let (Some(h), Some(d)) = (split[2].as_const(), split[3].as_const()) else {
        return false;
    };
    t.shape.len() == 3
        && t.shape[..2] == split[..2]
        && t.shape[2].as_const() == h.checked_mul(d)
        && t.dtype.is_float()
}

/// The projection `[batch, seq, heads · head]` an operand `[batch, heads, seq, head]` is
/// split from, with its head count.
fn projection(work: &Work, live: &Uses, operand: TensorId) -> Option<(TensorId, usize)> {
    let tr = live.producer[operand.index()]?;
    let LayerKind::Transpose(t) = &work.layers[tr].kind else {
        return None;
    };
    if t.perm != SWAP_HEADS {
        return None;
    }
    let split = work.layers[tr].inputs[0];
    let rs = live.producer[split.index()]?;
    if !matches!(work.layers[rs].kind, LayerKind::Reshape(_)) {
        return None;
    }
    let joined = work.layers[rs].inputs[0];
    let shape = &work.ty(split).shape;
    (shape.len() == 4 && joins(work.ty(joined), shape))
        .then(|| Some((joined, usize::try_from(shape[2].as_const()?).ok()?)))?
}

/// The `Transpose` to `[batch, seq, heads, head]` that alone reads the output of layer `a`.
fn joining_transpose(work: &Work, live: &Uses, a: usize) -> Option<usize> {
    let tr = live.only_reader(work.layers[a].outputs[0])?;
    match &work.layers[tr].kind {
        LayerKind::Transpose(t) if t.perm == SWAP_HEADS => Some(tr),
        _ => None,
    }
}

/// Folds the heads' layout changes into every `Attention` layer of `work` whose operands and
/// output allow it.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)]) {
    for a in 0..work.layers.len() {
        let LayerKind::Attention(att) = &work.layers[a].kind else {
            continue;
        };
        if att.q_heads != 0 || att.past || att.nonpad || att.scores.is_some() {
            continue;
        }
        let live = Uses::live(work, outputs);
        let ins = &work.layers[a].inputs;
        let (Some((q, hq)), Some((k, hk)), Some((v, hv))) = (
            projection(work, &live, ins[0]),
            projection(work, &live, ins[1]),
            projection(work, &live, ins[2]),
        ) else {
            continue;
        };
        let Some(tr) = joining_transpose(work, &live, a) else {
            continue;
        };
        if hk != hv {
            continue;
        }
        let kind = LayerKind::Attention(Attention {
            q_heads: hq,
            kv_heads: hk,
            ..att.clone()
        });
        let mut inputs = vec![q, k, v];
        inputs.extend_from_slice(&ins[3..]);
        let Ok(mut out) = kind.op().infer(&work.infer_inputs(&inputs)) else {
            continue;
        };
        let swapped = work.layers[tr].outputs[0];
        let Some(head) = work.ty(swapped).shape[3].as_const() else {
            continue;
        };
        let view = LayerKind::Reshape(Reshape::new(vec![0, 0, hq as i64, head]));
        let heads = InferInput {
            dtype: out[0].dtype,
            shape: &out[0].shape,
            value: None,
        };
        if view.op().infer(&[heads]).ok().as_deref() != Some(std::slice::from_ref(work.ty(swapped)))
        {
            continue;
        }
        let joined = work.new_tensor(format!("{}/joined", work.layers[a].name));
        work.tensors[joined.index()].ty = Some(out.remove(0));
        let layer = &mut work.layers[a];
        layer.kind = kind;
        layer.inputs = inputs;
        layer.outputs[0] = joined;
        work.layers[tr].kind = view;
        work.layers[tr].inputs = vec![joined];
    }
}
