//! The score matrix an `Attention` layer also outputs (ONNX `qk_matmul_output`): for every
//! batch, query head, query and key, the scaled product (soft-capped), then with the bias
//! and rules, then their softmax, at the stage asked for. Computed apart from the blocked
//! attention, which never holds the whole matrix.

use rayon::prelude::*;
use torchtrt_core::layers::ScoreStage;

use super::{AttnElem, Problem};
use crate::scalar::Real;

/// Writes the scores of `p` at `stage` into `out`, `[batch, q_heads, q_seq, keys]`.
pub(super) fn scores<C: AttnElem>(p: &Problem<'_, C>, stage: ScoreStage, out: &mut [C]) {
    let [_, hq, sq, d] = p.q.1.dims;
    let total = p.keys.len();
    if total == 0 {
        return;
    }
    out.par_chunks_mut(sq * total)
        .enumerate()
        .for_each(|(bh, plane)| {
            let (b, h) = (bh / hq, bh % hq);
            let hk = h / p.group;
            let (offset, valid) = match &p.valid {
                Some(v) => (v[b] - sq as i64, v[b]),
                None => (p.keys.past_len() as i64, total as i64),
            };
            let mut bias = vec![<C as Real>::ZERO; total];
            for (i, row) in plane.chunks_exact_mut(total).enumerate() {
                let qa = p.q.1.row(b, h, i);
                let q = &p.q.0[qa..qa + d];
                for (j, s) in row.iter_mut().enumerate() {
                    let (kdata, _, ka) = p.keys.block(b, hk, j);
                    let dot = q
                        .iter()
                        .zip(&kdata[ka..ka + d])
                        .fold(<C as Real>::ZERO, |acc, (&x, &y)| acc + x * y);
                    *s = dot * p.scale;
                    if p.softcap > <C as Real>::ZERO {
                        *s = p.softcap * (*s / p.softcap).tanh();
                    }
                }
                if stage == ScoreStage::Product {
                    continue;
                }
                match &p.bias {
                    Some(mask) => mask.row(b, h, i, 0, &mut bias),
                    None => bias.fill(<C as Real>::ZERO),
                }
                for (j, bv) in bias.iter_mut().enumerate() {
                    if !p.rule.allows(i as i64, j as i64, offset, valid) {
                        *bv = <C as Real>::NEG_INFINITY;
                    }
                }
                for (s, &bv) in row.iter_mut().zip(&bias) {
                    *s = *s + bv;
                }
                if stage == ScoreStage::Weights {
                    softmax_row(row, &bias);
                }
            }
        });
}

/// The softmax of one row in place; zeros when every bias is `−∞` (no key attended).
fn softmax_row<C: Real>(row: &mut [C], bias: &[C]) {
    if bias.iter().all(|&b| b == <C as Real>::NEG_INFINITY) {
        row.fill(<C as Real>::ZERO);
        return;
    }
    let m = row
        .iter()
        .fold(<C as Real>::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    let mut sum = <C as Real>::ZERO;
    for v in row.iter_mut() {
        *v = (*v - m).exp();
        sum = sum + *v;
    }
    for v in row.iter_mut() {
        *v = *v / sum;
    }
}
