//! Attention, blocked: for each batch, head and block of queries the keys are visited a
//! block at a time. A block's scores (queries × keys) are one matrix product; each query's
//! running maximum, sum and output are then updated (online softmax) and the block's
//! weighted values added by a second product, so at most one block of the score matrix
//! exists at a time.

mod scores;

use rayon::prelude::*;
use torchtrt_core::layers::Attention;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, LayerOp, Tensor};

use super::reduce::fold::{Fold, MaxOf, SumOf, fold_run, map_fold_mut};
use super::reduce::short_rows::{self, RowFold};
use crate::dispatch::with_float;
use crate::linalg::{GemmElem, MatRef, gemm};
use crate::scalar::{FloatElem, Real, as_f32, as_f32_mut};
use crate::simd::multiversion;
use crate::strided::broadcast_strides;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Attention";

/// Queries per task (128 measured faster than 64 for BERT-sized heads at 128 and 512
/// positions: fewer products, each of the keys packed once per task).
const Q_BLOCK: usize = 128;
/// Keys per block of scores.
const K_BLOCK: usize = 128;

struct AttentionKernel {
    layer: Attention,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Attention,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(AttentionKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// Where one operand's elements lie: `(b, h, s, d)` at `b·batch + h·head + s·seq + d`.
#[derive(Clone, Copy, Debug)]
struct Layout {
    batch: usize,
    head: usize,
    seq: usize,
}

/// Batch, heads, sequence length and head size of an operand, and its layout.
#[derive(Clone, Copy, Debug)]
struct Operand {
    dims: [usize; 4],
    at: Layout,
}

impl Operand {
    fn new(what: &str, shape: &[usize], heads: usize) -> Result<Operand, String> {
        match (shape, heads) {
            (&[b, h, s, d], 0) => Ok(Operand {
                dims: [b, h, s, d],
                at: Layout {
                    batch: h * s * d,
                    head: s * d,
                    seq: d,
                },
            }),
            (&[b, s, hidden], n) if n > 0 && hidden % n == 0 => Ok(Operand {
                dims: [b, n, s, hidden / n],
                at: Layout {
                    batch: s * hidden,
                    head: hidden / n,
                    seq: hidden,
                },
            }),
            _ => Err(format!(
                "{WHAT}: {what} {shape:?} is not [batch, heads, seq, head] or, with {heads} \
                 heads, [batch, seq, hidden]"
            )),
        }
    }

    /// Offset of row `(b, h, s)`.
    #[inline(always)]
    fn row(&self, b: usize, h: usize, s: usize) -> usize {
        b * self.at.batch + h * self.at.head + s * self.at.seq
    }
}

/// The keys (or values) of one batch and head: the past ones, then the new ones.
struct KeySource<'a, C> {
    past: Option<(&'a [C], Operand)>,
    new: (&'a [C], Operand),
}

impl<C: Real> KeySource<'_, C> {
    fn len(&self) -> usize {
        self.past_len() + self.new.1.dims[2]
    }

    fn past_len(&self) -> usize {
        self.past.map_or(0, |p| p.1.dims[2])
    }

    /// The keys from `j` on of batch `b`, head `h`, within one source (past or new): the
    /// source's elements, the distance between keys, and where key `j` starts.
    fn block(&self, b: usize, h: usize, j: usize) -> (&[C], usize, usize) {
        let p = self.past_len();
        let (data, op, s) = match self.past {
            Some((data, op)) if j < p => (data, op, j),
            _ => (self.new.0, self.new.1, j - p),
        };
        (data, op.at.seq, op.row(b, h, s))
    }
}

/// The additive mask, broadcast to `[batch, q_heads, q_seq, len]`; keys from `len` on are
/// masked.
struct Bias<'a, C> {
    values: &'a [C],
    strides: [usize; 4],
    len: usize,
}

impl<'a, C: Real> Bias<'a, C> {
    /// The mask `values` of shape `shape` (a boolean mask already turned into `0` and `−∞`)
    /// for queries `[batch, heads, seq]`.
    fn new(values: &'a [C], shape: &[usize], q: [usize; 3]) -> Result<Bias<'a, C>, String> {
        let len = *shape.last().unwrap_or(&1);
        let full = [q[0], q[1], q[2], len];
        let s = broadcast_strides(shape, &full).map_err(|e| format!("{WHAT}: mask {e}"))?;
        Ok(Bias {
            values,
            strides: [s[0] as usize, s[1] as usize, s[2] as usize, s[3] as usize],
            len,
        })
    }

    /// For each of `batch` batches, one past the last key whose bias is not `−∞` for some
    /// head of `heads` and query of `queries` (0 when every key is masked). Each row is
    /// scanned from its end to its last open key, so a padding mask costs its masked tail.
    fn open_keys(&self, batch: usize, heads: usize, queries: usize) -> Vec<i64> {
        let [sb, sh, sq, sk] = self.strides;
        let heads = if sh == 0 { 1 } else { heads };
        let queries = if sq == 0 { 1 } else { queries };
        let mut open = vec![0i64; batch];
        for (b, o) in open.iter_mut().enumerate() {
            for h in 0..heads {
                for i in 0..queries {
                    let base = b * sb + h * sh + i * sq;
                    let last = (*o as usize..self.len)
                        .rev()
                        .find(|&j| self.values[base + j * sk] != <C as Real>::NEG_INFINITY);
                    if let Some(j) = last {
                        *o = j as i64 + 1;
                    }
                    if *o as usize == self.len {
                        break;
                    }
                }
            }
        }
        open
    }

    /// The biases of query `(b, h, i)` for keys `0..len`, where they lie side by side.
    #[inline(always)]
    fn contiguous_row(&self, b: usize, h: usize, i: usize) -> Option<&[C]> {
        let base = b * self.strides[0] + h * self.strides[1] + i * self.strides[2];
        (self.strides[3] == 1).then(|| &self.values[base..base + self.len])
    }

    /// The biases of query `(b, h, i)` for keys `j0..j0 + out.len()`.
    #[inline(always)]
    fn row(&self, b: usize, h: usize, i: usize, j0: usize, out: &mut [C]) {
        let base = b * self.strides[0] + h * self.strides[1] + i * self.strides[2];
        for (jj, o) in out.iter_mut().enumerate() {
            let j = j0 + jj;
            *o = if j < self.len {
                self.values[base + j * self.strides[3]]
            } else {
                <C as Real>::NEG_INFINITY
            };
        }
    }
}

/// Everything a task reads.
struct Problem<'a, C> {
    q: (&'a [C], Operand),
    keys: KeySource<'a, C>,
    values: KeySource<'a, C>,
    bias: Option<Bias<'a, C>>,
    scale: C,
    softcap: C,
    /// Causal and window rules.
    rule: Attention,
    /// Each batch's count of valid keys.
    valid: Option<Vec<i64>>,
    /// Each batch's keys up to the last one its mask leaves open for any query (the keys
    /// after it get no weight: a padding mask's tail), which are all that is computed.
    open: Option<Vec<i64>>,
    /// Query heads per key/value head.
    group: usize,
    /// Head size of the values.
    dv: usize,
}

impl Kernel for AttentionKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let l = &self.layer;
        let n_in = l.input_count();
        check_arity(WHAT, inputs, outputs, n_in..=n_in, l.num_outputs())?;
        let (q, k, v) = (inputs[0], inputs[1], inputs[2]);
        for t in [q, k, v] {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let qo = Operand::new("q", q.shape(), l.q_heads)?;
        let ko = Operand::new("k", k.shape(), l.kv_heads)?;
        let vo = Operand::new("v", v.shape(), l.kv_heads)?;
        let past = if l.past {
            let at = l.past_input();
            let (pk, pv) = (inputs[at], inputs[at + 1]);
            check_dtype(WHAT, pk, self.dtype)?;
            check_dtype(WHAT, pv, self.dtype)?;
            Some((
                (pk, Operand::new("past keys", pk.shape(), 0)?),
                (pv, Operand::new("past values", pv.shape(), 0)?),
            ))
        } else {
            None
        };
        let [b, hq, sq, d] = qo.dims;
        let hkv = ko.dims[1];
        let consistent = ko.dims[0] == b
            && vo.dims[..3] == ko.dims[..3]
            && ko.dims[3] == d
            && hkv > 0
            && hq % hkv == 0
            && past.is_none_or(|((_, pk), (_, pv))| {
                pk.dims[..2] == [b, hkv]
                    && pv.dims[..3] == pk.dims[..3]
                    && pk.dims[3] == d
                    && pv.dims[3] == vo.dims[3]
            });
        if !consistent {
            return Err(format!(
                "{WHAT}: q {q}, k {k} and v {v} (and the past) do not agree on batch, heads, \
                 lengths or head sizes"
            ));
        }
        let dv = vo.dims[3];
        let valid = if l.nonpad {
            let t = inputs[l.nonpad_input()];
            let v = t
                .to_i64_vec()
                .filter(|v| t.dtype() == DType::I64 && v.len() == b)
                .ok_or_else(|| format!("{WHAT}: the valid-key counts {t} must be i64[{b}]"))?;
            Some(v)
        } else {
            None
        };
        let shape = if l.q_heads == 0 {
            vec![b, hq, sq, dv]
        } else {
            vec![b, sq, hq * dv]
        };
        let (out, rest) = outputs.split_first_mut().ok_or("Attention: no output")?;
        check_output(WHAT, out, self.dtype, &shape)?;
        let past_len = past.map_or(0, |((_, pk), _)| pk.dims[2]);
        let score_out = match (l.scores, rest.first_mut()) {
            (Some(stage), Some(t)) => {
                check_output(WHAT, t, self.dtype, &[b, hq, sq, past_len + ko.dims[2]])?;
                Some((stage, t))
            }
            _ => None,
        };
        let scale = f64::from(l.scale.unwrap_or(1.0 / (d as f32).sqrt()));
        with_float!(self.dtype, WHAT, T => {
            let mut bufs: [Vec<<T as FloatElem>::C>; 6] = Default::default();
            let [qb, kb, vb, pkb, pvb, mb] = &mut bufs;
            let qc = T::view(elems::<T>(q)?, qb);
            let kc = T::view(elems::<T>(k)?, kb);
            let vc = T::view(elems::<T>(v)?, vb);
            let (pk, pv) = match past {
                Some(((pk, pko), (pv, pvo))) => (
                    Some((T::view(elems::<T>(pk)?, pkb), pko)),
                    Some((T::view(elems::<T>(pv)?, pvb), pvo)),
                ),
                None => (None, None),
            };
            let bias = if l.mask {
                let mask = inputs[3];
                let values = if mask.dtype() == DType::Bool {
                    let (open, shut) = (<<T as FloatElem>::C as Real>::ZERO, <<T as FloatElem>::C as Real>::NEG_INFINITY);
                    mb.extend(mask.bytes().iter().map(|&v| if v != 0 { open } else { shut }));
                    &mb[..]
                } else if mask.dtype() == self.dtype {
                    T::view(elems::<T>(mask)?, mb)
                } else {
                    return Err(format!("{WHAT}: the mask {mask} must be bool or {}", self.dtype));
                };
                Some(Bias::new(values, mask.shape(), [b, hq, sq])?)
            } else {
                None
            };
            let open = bias.as_ref().map(|m| m.open_keys(b, hq, sq));
            let problem = Problem {
                q: (qc, qo),
                keys: KeySource { past: pk, new: (kc, ko) },
                values: KeySource { past: pv, new: (vc, vo) },
                bias,
                scale: <T as FloatElem>::C::from_f64(scale),
                softcap: <T as FloatElem>::C::from_f64(f64::from(l.softcap)),
                rule: l.clone(),
                open,
                valid: valid.clone(),
                group: hq / hkv,
                dv,
            };
            T::write(elems_mut(out)?, &mut Vec::new(), |oc| attend(&problem, l.q_heads > 0, oc));
            if let Some((stage, t)) = score_out {
                T::write(elems_mut(t)?, &mut Vec::new(), |sc| scores::scores(&problem, stage, sc));
            }
            Ok(())
        })
    }
}

/// Computes every query of `p` into `out` (in the query's layout: rank 3 when `rank3`).
fn attend<C: AttnElem>(p: &Problem<'_, C>, rank3: bool, out: &mut [C]) {
    let [b, hq, sq, _] = p.q.1.dims;
    let dv = p.dv;
    if out.is_empty() {
        return;
    }
    let mut staged = Vec::new();
    let heads_first: &mut [C] = if rank3 {
        staged.resize(out.len(), <C as Real>::ZERO);
        &mut staged
    } else {
        &mut *out
    };
    heads_first
        .par_chunks_mut(sq * dv)
        .enumerate()
        .for_each(|(bh, rows)| {
            rows.par_chunks_mut(Q_BLOCK * dv)
                .enumerate()
                .for_each(|(blk, dst)| attend_block(p, bh / hq, bh % hq, blk * Q_BLOCK, dst));
        });
    if rank3 {
        for bi in 0..b {
            for h in 0..hq {
                for i in 0..sq {
                    let src = &staged[((bi * hq + h) * sq + i) * dv..][..dv];
                    out[((bi * sq + i) * hq + h) * dv..][..dv].copy_from_slice(src);
                }
            }
        }
    }
}

/// A compute type attention runs in: f32 or f64, which `gemm` multiplies.
pub(super) trait AttnElem: Real + GemmElem {}

impl<C: Real + GemmElem> AttnElem for C {}

/// Queries `i0..` of batch `b`, head `h` (as many as `dst` has rows of `dv`): for each block
/// of keys (never straddling past and new keys) the scores come from one product, the
/// rules and the online softmax update them, and a second product adds the block's
/// weighted values to the output rows.
fn attend_block<C: AttnElem>(p: &Problem<'_, C>, b: usize, h: usize, i0: usize, dst: &mut [C]) {
    let (dv, d) = (p.dv, p.q.1.dims[3]);
    let rows = dst.len() / dv;
    let hk = h / p.group;
    let total = p.keys.len();
    let past = p.keys.past_len();
    let (offset, valid) = match &p.valid {
        Some(v) => (v[b] - p.q.1.dims[2] as i64, v[b]),
        None => (past as i64, total as i64),
    };
    let valid = p.open.as_ref().map_or(valid, |o| valid.min(o[b]));
    let mut q = vec![<C as Real>::ZERO; rows * d];
    for (r, row) in q.chunks_exact_mut(d).enumerate() {
        let at = p.q.1.row(b, h, i0 + r);
        for (o, &v) in row.iter_mut().zip(&p.q.0[at..at + d]) {
            *o = v * p.scale;
        }
    }
    let mut scores = vec![<C as Real>::ZERO; rows * K_BLOCK];
    let mut state = Online {
        max: vec![<C as Real>::NEG_INFINITY; rows],
        sum: vec![<C as Real>::ZERO; rows],
        allowed: vec![false; rows],
    };
    dst.fill(<C as Real>::ZERO);
    let last_query = (i0 + rows - 1) as i64;
    let blocks = (0..past)
        .step_by(K_BLOCK)
        .map(|j| (j, K_BLOCK.min(past - j)))
        .chain(
            (past..total)
                .step_by(K_BLOCK)
                .map(|j| (j, K_BLOCK.min(total - j))),
        );
    for (j0, n) in blocks {
        if j0 as i64 >= valid || (p.rule.causal && j0 as i64 > last_query + offset) {
            break;
        }
        let n = n.min((valid - j0 as i64) as usize);
        let s = &mut scores[..rows * n];
        let (kdata, kstride, kbase) = p.keys.block(b, hk, j0);
        let qm = MatRef::row_major(&q, rows, d);
        let kt = MatRef {
            data: &kdata[kbase..],
            rows: d,
            cols: n,
            row_stride: 1,
            col_stride: kstride,
        };
        if gemm(s, qm, kt, false, false).is_err() {
            dst.fill(<C as Real>::ZERO);
            return;
        }
        let ctx = BlockRows {
            b,
            h,
            i0,
            j0,
            offset,
            valid,
        };
        if !update_rows(p, &ctx, s, n, dst, &mut state) {
            continue;
        }
        let (vdata, vstride, vbase) = p.values.block(b, hk, j0);
        let vm = MatRef {
            data: &vdata[vbase..],
            rows: n,
            cols: dv,
            row_stride: vstride,
            col_stride: 1,
        };
        if gemm(dst, MatRef::row_major(s, rows, n), vm, true, false).is_err() {
            dst.fill(<C as Real>::ZERO);
            return;
        }
    }
    for (r, acc) in dst.chunks_exact_mut(dv).enumerate() {
        if !state.allowed[r] || state.sum[r] == <C as Real>::ZERO {
            acc.fill(<C as Real>::ZERO);
        } else {
            let inv = <C as Real>::ONE / state.sum[r];
            for a in acc.iter_mut() {
                *a = *a * inv;
            }
        }
    }
}

/// The running maximum and sum of each query row, and whether any key may be attended.
struct Online<C> {
    max: Vec<C>,
    sum: Vec<C>,
    allowed: Vec<bool>,
}

/// Where a block of scores lies: batch, head, first query, first key, and the batch's
/// causal offset and valid keys.
struct BlockRows {
    b: usize,
    h: usize,
    i0: usize,
    j0: usize,
    offset: i64,
    valid: i64,
}

multiversion! {
    /// Turns a block's scores (`rows × n`) into weights for the values: soft cap, then for
    /// the keys the rules allow (one range a row, [`Attention::keys_allowed`]) the mask and
    /// `e^(s − max)` with each row's running maximum and sum updated and its output row
    /// rescaled (a row's first block with any weight has nothing to rescale: its output
    /// and sum are still zero); every other weight is zero. Returns whether any weight is non-zero. The
    /// rows' maxima are all taken before any exponential, so that rows overlap instead of
    /// each waiting on its own maximum.
    fn update_rows<C: AttnElem>(
        p: &Problem<'_, C>,
        at: &BlockRows,
        scores: &mut [C],
        n: usize,
        dst: &mut [C],
        state: &mut Online<C>,
    ) -> bool {
        let dv = p.dv;
        let mut bias = [<C as Real>::ZERO; K_BLOCK];
        let mut any = false;
        let j0 = at.j0 as i64;
        let keys = p.bias.as_ref().map_or(i64::MAX, |m| m.len as i64);
        let mut live = [(0usize, 0usize, <C as Real>::NEG_INFINITY); Q_BLOCK];
        debug_assert!(scores.len() <= Q_BLOCK * n, "more than Q_BLOCK query rows");
        for ((r, s), live) in scores.chunks_exact_mut(n).enumerate().zip(&mut live) {
            let i = at.i0 + r;
            if p.softcap > <C as Real>::ZERO {
                for o in s.iter_mut() {
                    *o = p.softcap * (*o / p.softcap).tanh();
                }
            }
            let (lo, hi) = p.rule.keys_allowed(i as i64, at.offset, at.valid);
            let first = (lo.max(j0) - j0).clamp(0, n as i64) as usize;
            let end = (hi.min(keys).min(j0 + n as i64) - j0).clamp(first as i64, n as i64) as usize;
            let allowed = match &p.bias {
                _ if first == end => false,
                None => true,
                Some(mask) => {
                    let (k0, k1) = (at.j0 + first, at.j0 + end);
                    let row = match mask.contiguous_row(at.b, at.h, i) {
                        Some(row) => &row[k0..k1],
                        None => {
                            mask.row(at.b, at.h, i, k0, &mut bias[..end - first]);
                            &bias[..end - first]
                        }
                    };
                    for (o, &bv) in s[first..end].iter_mut().zip(row) {
                        *o = *o + bv;
                    }
                    row.iter().any(|&bv| bv != <C as Real>::NEG_INFINITY)
                }
            };
            state.allowed[r] |= allowed;
            let block_max = if allowed { row_max(&s[first..end]) } else { <C as Real>::NEG_INFINITY };
            *live = (first, end, block_max);
        }
        for ((r, s), &(first, end, block_max)) in scores.chunks_exact_mut(n).enumerate().zip(&live) {
            if block_max == <C as Real>::NEG_INFINITY {
                s.fill(<C as Real>::ZERO);
                continue;
            }
            let m = if block_max > state.max[r] { block_max } else { state.max[r] };
            let block_sum = exp_sum::<C, M>(&mut s[first..end], m);
            s[..first].fill(<C as Real>::ZERO);
            s[end..].fill(<C as Real>::ZERO);
            let earlier = state.max[r] != <C as Real>::NEG_INFINITY
                || state.sum[r] != <C as Real>::ZERO;
            let correction = if earlier {
                (state.max[r] - m).exp_with::<M>()
            } else {
                <C as Real>::ONE
            };
            state.sum[r] = if earlier { state.sum[r] * correction + block_sum } else { block_sum };
            state.max[r] = m;
            if correction != <C as Real>::ONE {
                for a in dst[r * dv..(r + 1) * dv].iter_mut() {
                    *a = *a * correction;
                }
            }
            any = true;
        }
        any
    }
}

/// The maximum of a row of scores (NaN if any is NaN): in registers for f32 rows
/// [`short_rows`] takes, else through the lane folds.
#[inline(always)]
fn row_max<C: AttnElem>(row: &[C]) -> C {
    if let Some(x) = as_f32(row) {
        let mut m = [0f32];
        if short_rows::reduce(RowFold::Max, x, x.len(), &mut m) {
            return C::from_f64(f64::from(m[0]));
        }
    }
    fold_run(MaxOf, MaxOf.init(), row)
}

/// `row[k] = e^(row[k] − m)` in place and their sum: in registers for f32 rows
/// [`short_rows`] takes, else through the lane folds.
#[inline(always)]
fn exp_sum<C: AttnElem, M: crate::simd::Madd>(row: &mut [C], m: C) -> C {
    if let (Some(x), Some(shift)) = (as_f32_mut(row), as_f32(&[m]).map(|v| v[0]))
        && let Some(sum) = short_rows::exp_shifted(x, shift)
    {
        return C::from_f64(f64::from(sum));
    }
    map_fold_mut(SumOf { mean: false }, <C as Real>::ZERO, row, |v| {
        (v - m).exp_with::<M>()
    })
}
