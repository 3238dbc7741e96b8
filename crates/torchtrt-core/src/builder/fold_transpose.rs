//! Transposes into MatMul: a `Transpose` that only swaps the last two dims and whose result
//! only one `MatMul` reads becomes that MatMul's `transpose_a`/`transpose_b` flag (a GEMM
//! reads either layout at no cost), so the transposed copy is never made; also through the
//! reshapes and the scalar multiplication that exported attention puts around the key's
//! transpose. First, a `Transpose` of a `Transpose` nothing else reads becomes one
//! `Transpose` of the first one's input (the key's two permutations in exported attention).
//! The layers bypassed are left unread, for `compact` to drop.

use super::Work;
use super::uses::Uses;
use crate::layers::{ElementwiseOp, LayerKind, Transpose};
use crate::network::TensorId;

/// Whether `perm` swaps the last two of its dims and keeps the others.
fn swaps_last_two(perm: &[usize]) -> bool {
    let n = perm.len();
    n >= 2
        && perm[n - 2] == n - 1
        && perm[n - 1] == n - 2
        && perm[..n - 2].iter().enumerate().all(|(i, &p)| i == p)
}

/// The tensor `k` when `t` is `k` with its last two dims swapped, through layers nothing
/// else reads: a `Transpose` of the last two dims, or one between two `Reshape`s that only
/// merge and split the leading dims (how ONNX exporters swap the dims of a rank-4 key).
fn swapped_source(work: &Work, uses: &Uses, t: TensorId) -> Option<TensorId> {
    let swaps = |l: usize| matches!(&work.layers[l].kind, LayerKind::Transpose(tr) if swaps_last_two(&tr.perm));
    let p = uses.sole(work, t)?;
    if swaps(p) {
        return Some(work.layers[p].inputs[0]);
    }
    if !matches!(work.layers[p].kind, LayerKind::Reshape(_)) {
        return None;
    }
    let tr = uses.sole(work, work.layers[p].inputs[0])?;
    if !swaps(tr) {
        return None;
    }
    let first = uses.sole(work, work.layers[tr].inputs[0])?;
    if !matches!(work.layers[first].kind, LayerKind::Reshape(_)) {
        return None;
    }
    let k = work.layers[first].inputs[0];
    let (ks, ts) = (&work.ty(k).shape, &work.ty(t).shape);
    let merged = &work.ty(work.layers[first].outputs[0]).shape;
    let n = ks.len();
    let last_two_kept = n >= 2
        && merged.len() >= 2
        && merged[merged.len() - 2..] == ks[n - 2..]
        && ts.len() == n
        && ts[..n - 2] == ks[..n - 2]
        && ts[n - 2] == ks[n - 1]
        && ts[n - 1] == ks[n - 2];
    last_two_kept.then_some(k)
}

/// A MatMul operand `t` that is `Mul(u, s)` (either order) with `s` a one-element tensor and
/// `t` read only by the MatMul: the Mul's layer and which of its inputs is `u`.
fn scaled(work: &Work, uses: &Uses, t: TensorId) -> Option<(usize, usize)> {
    let m = uses.sole(work, t)?;
    let LayerKind::Elementwise(e) = &work.layers[m].kind else {
        return None;
    };
    let single = |x: TensorId| work.ty(x).shape.iter().all(|d| d.as_const() == Some(1));
    match (e.op, work.layers[m].inputs.as_slice()) {
        (ElementwiseOp::Mul, [a, b]) if single(*b) && !single(*a) => Some((m, 0)),
        (ElementwiseOp::Mul, [a, b]) if single(*a) && !single(*b) => Some((m, 1)),
        _ => None,
    }
}

/// `outer` applied to the result of `inner`, as one permutation (output dim `i` of a
/// `Transpose` is input dim `perm[i]`).
fn compose(inner: &[usize], outer: &[usize]) -> Vec<usize> {
    outer.iter().map(|&j| inner[j]).collect()
}

/// Makes every `Transpose` whose input is a `Transpose` nothing else reads (on the same
/// device) read that one's input instead, with the permutations composed.
fn merge_chains(work: &mut Work, outputs: &[(String, TensorId)]) {
    for b in 0..work.layers.len() {
        let LayerKind::Transpose(outer) = &work.layers[b].kind else {
            continue;
        };
        let uses = Uses::new(work, outputs);
        let Some(a) = uses.sole(work, work.layers[b].inputs[0]) else {
            continue;
        };
        let LayerKind::Transpose(inner) = &work.layers[a].kind else {
            continue;
        };
        if work.devices[a] != work.devices[b] || inner.perm.len() != outer.perm.len() {
            continue;
        }
        let perm = compose(&inner.perm, &outer.perm);
        work.layers[b].inputs[0] = work.layers[a].inputs[0];
        work.layers[b].kind = LayerKind::Transpose(Transpose { perm });
    }
}

/// Merges chains of transposes, then folds every transpose of `work` that swaps the last two
/// dims into the MatMul that reads it, also through a multiplication by a scalar between them
/// (`(kᵀ·s)` becomes `(k·s)ᵀ`).
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)]) {
    merge_chains(work, outputs);
    for m in 0..work.layers.len() {
        if !matches!(work.layers[m].kind, LayerKind::MatMul(_)) {
            continue;
        }
        // A MatMul with a bias keeps its A dense: the bias rides on one product over its rows.
        let first = usize::from(work.layers[m].inputs.len() > 2);
        for operand in first..work.layers[m].inputs.len().min(2) {
            let uses = Uses::new(work, outputs);
            let t = work.layers[m].inputs[operand];
            let device = work.devices[m];
            if let Some(k) = swapped_source(work, &uses, t) {
                work.layers[m].inputs[operand] = k;
            } else if let Some((mul, slot)) = scaled(work, &uses, t)
                && work.devices[mul] == device
                && let Some(k) = swapped_source(work, &uses, work.layers[mul].inputs[slot])
            {
                work.layers[mul].inputs[slot] = k;
                let shape = work.ty(k).shape.clone();
                if let Some(ty) = work.tensors[t.index()].ty.as_mut() {
                    ty.shape = shape;
                }
            } else {
                continue;
            }
            if let LayerKind::MatMul(mm) = &mut work.layers[m].kind {
                if operand == 0 {
                    mm.transpose_a = !mm.transpose_a;
                } else {
                    mm.transpose_b = !mm.transpose_b;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{compose, swaps_last_two};

    #[test]
    fn composed_permutations_apply_the_inner_one_first() {
        assert_eq!(compose(&[1, 0, 2], &[0, 2, 1]), [1, 2, 0]);
        assert_eq!(compose(&[1, 0, 2, 3], &[1, 0, 3, 2]), [0, 1, 3, 2]);
        assert_eq!(compose(&[2, 0, 1], &[1, 2, 0]), [0, 1, 2]);
    }

    #[test]
    fn only_a_swap_of_the_last_two_dims_folds() {
        assert!(swaps_last_two(&[1, 0]));
        assert!(swaps_last_two(&[0, 1, 3, 2]));
        assert!(!swaps_last_two(&[0, 2, 1, 3]));
        assert!(!swaps_last_two(&[1, 0, 2]));
        assert!(!swaps_last_two(&[0]));
        assert!(!swaps_last_two(&[0, 1]));
    }
}
