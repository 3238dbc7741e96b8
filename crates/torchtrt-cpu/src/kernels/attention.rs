//! Attention, blocked: for each batch, head and block of queries the keys are visited a
//! block at a time. A block's scores (queries × keys) come from the keys transposed into
//! scratch; each query's running maximum, sum and output are then updated (online
//! softmax), so at most one block of the score matrix exists at a time.

use rayon::prelude::*;
use torchtrt_core::layers::Attention;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_float;
use crate::scalar::{FloatElem, Real};
use crate::simd::multiversion;
use crate::strided::broadcast_strides;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Attention";

/// Queries per task.
const Q_BLOCK: usize = 32;
/// Keys per block of scores.
const K_BLOCK: usize = 64;

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

    /// Key `j` of batch `b`, head `h`.
    #[inline(always)]
    fn row(&self, b: usize, h: usize, j: usize) -> &[C] {
        let p = self.past_len();
        let (data, op, s) = match self.past {
            Some((data, op)) if j < p => (data, op, j),
            _ => (self.new.0, self.new.1, j - p),
        };
        let at = op.row(b, h, s);
        &data[at..at + op.dims[3]]
    }
}

/// The additive mask, broadcast to `[batch, q_heads, q_seq, len]`; keys from `len` on are
/// masked.
struct Bias<C> {
    values: Vec<C>,
    strides: [usize; 4],
    len: usize,
}

impl<C: Real> Bias<C> {
    fn new(mask: &Tensor, dtype: DType, q: [usize; 3]) -> Result<Bias<C>, String> {
        let shape = mask.shape();
        let len = *shape.last().unwrap_or(&1);
        let values: Vec<C> = if mask.dtype() == DType::Bool {
            mask.bytes()
                .iter()
                .map(|&b| if b != 0 { C::ZERO } else { C::NEG_INFINITY })
                .collect()
        } else if mask.dtype() == dtype {
            mask.to_f64_vec().into_iter().map(C::from_f64).collect()
        } else {
            return Err(format!("{WHAT}: the mask {mask} must be bool or {dtype}"));
        };
        let full = [q[0], q[1], q[2], len];
        let s = broadcast_strides(shape, &full).map_err(|e| format!("{WHAT}: mask {e}"))?;
        Ok(Bias {
            values,
            strides: [s[0] as usize, s[1] as usize, s[2] as usize, s[3] as usize],
            len,
        })
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
                C::NEG_INFINITY
            };
        }
    }
}

/// Everything a task reads.
struct Problem<'a, C> {
    q: (&'a [C], Operand),
    keys: KeySource<'a, C>,
    values: KeySource<'a, C>,
    bias: Option<Bias<C>>,
    scale: C,
    softcap: C,
    /// Causal and window rules.
    rule: Attention,
    /// Each batch's count of valid keys.
    valid: Option<Vec<i64>>,
    /// Query heads per key/value head.
    group: usize,
    /// Head size of the values.
    dv: usize,
}

impl Kernel for AttentionKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let l = &self.layer;
        let n_in = l.input_count();
        check_arity(WHAT, inputs, outputs, n_in..=n_in, 1)?;
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
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let scale = f64::from(l.scale.unwrap_or(1.0 / (d as f32).sqrt()));
        with_float!(self.dtype, WHAT, T => {
            let mut bufs: [Vec<<T as FloatElem>::C>; 5] = Default::default();
            let [qb, kb, vb, pkb, pvb] = &mut bufs;
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
                Some(Bias::new(inputs[3], self.dtype, [b, hq, sq])?)
            } else {
                None
            };
            let problem = Problem {
                q: (qc, qo),
                keys: KeySource { past: pk, new: (kc, ko) },
                values: KeySource { past: pv, new: (vc, vo) },
                bias,
                scale: <T as FloatElem>::C::from_f64(scale),
                softcap: <T as FloatElem>::C::from_f64(f64::from(l.softcap)),
                rule: l.clone(),
                valid: valid.clone(),
                group: hq / hkv,
                dv,
            };
            T::write(elems_mut(out)?, &mut Vec::new(), |oc| attend(&problem, l.q_heads > 0, oc));
            Ok(())
        })
    }
}

/// Computes every query of `p` into `out` (in the query's layout: rank 3 when `rank3`).
fn attend<C: Real>(p: &Problem<'_, C>, rank3: bool, out: &mut [C]) {
    let [b, hq, sq, _] = p.q.1.dims;
    let dv = p.dv;
    if out.is_empty() {
        return;
    }
    let mut staged = Vec::new();
    let heads_first: &mut [C] = if rank3 {
        staged.resize(out.len(), C::ZERO);
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

multiversion! {
    /// Queries `i0..` of batch `b`, head `h` (as many as `dst` has rows of `dv`).
    fn attend_block<C: Real>(p: &Problem<'_, C>, b: usize, h: usize, i0: usize, dst: &mut [C]) {
        let (dv, d) = (p.dv, p.q.1.dims[3]);
        let rows = dst.len() / dv;
        let hk = h / p.group;
        let total = p.keys.len();
        let (offset, valid) = match &p.valid {
            Some(v) => (v[b] - p.q.1.dims[2] as i64, v[b]),
            None => (p.keys.past_len() as i64, total as i64),
        };
        let mut kt = vec![C::ZERO; d * K_BLOCK];
        let mut scores = [C::ZERO; K_BLOCK];
        let mut bias = [C::ZERO; K_BLOCK];
        let mut qrow = vec![C::ZERO; d];
        let mut max = [C::NEG_INFINITY; Q_BLOCK];
        let mut sum = [C::ZERO; Q_BLOCK];
        let mut allowed = [false; Q_BLOCK];
        dst.fill(C::ZERO);
        let last_query = i0 + rows - 1;
        for j0 in (0..total).step_by(K_BLOCK) {
            if j0 as i64 >= valid || (p.rule.causal && j0 as i64 > last_query as i64 + offset) {
                break;
            }
            let n = K_BLOCK.min(total - j0);
            for jj in 0..n {
                let key = p.keys.row(b, hk, j0 + jj);
                for (dd, &v) in key.iter().enumerate() {
                    kt[dd * K_BLOCK + jj] = v;
                }
            }
            for r in 0..rows {
                let i = i0 + r;
                let at = p.q.1.row(b, h, i);
                for (o, &v) in qrow.iter_mut().zip(&p.q.0[at..at + d]) {
                    *o = v * p.scale;
                }
                let s = &mut scores[..n];
                s.fill(C::ZERO);
                for (dd, &qd) in qrow.iter().enumerate() {
                    for (o, &kv) in s.iter_mut().zip(&kt[dd * K_BLOCK..dd * K_BLOCK + n]) {
                        *o = M::madd(qd, kv, *o);
                    }
                }
                if p.softcap > C::ZERO {
                    for o in s.iter_mut() {
                        *o = p.softcap * (*o / p.softcap).tanh();
                    }
                }
                let bs = &mut bias[..n];
                match &p.bias {
                    Some(mask) => mask.row(b, h, i, j0, bs),
                    None => bs.fill(C::ZERO),
                }
                for (jj, o) in bs.iter_mut().enumerate() {
                    if !p.rule.allows(i as i64, (j0 + jj) as i64, offset, valid) {
                        *o = C::NEG_INFINITY;
                    }
                }
                let mut block_max = C::NEG_INFINITY;
                for (o, &bv) in s.iter_mut().zip(bs.iter()) {
                    allowed[r] |= bv != C::NEG_INFINITY;
                    *o = *o + bv;
                    if *o > block_max {
                        block_max = *o;
                    }
                }
                if block_max == C::NEG_INFINITY || block_max.is_nan() {
                    continue;
                }
                let m = if block_max > max[r] { block_max } else { max[r] };
                let correction = (max[r] - m).exp_with::<M>();
                let mut block_sum = C::ZERO;
                for o in s.iter_mut() {
                    *o = (*o - m).exp_with::<M>();
                    block_sum = block_sum + *o;
                }
                sum[r] = sum[r] * correction + block_sum;
                max[r] = m;
                let acc = &mut dst[r * dv..(r + 1) * dv];
                if correction != C::ONE {
                    for a in acc.iter_mut() {
                        *a = *a * correction;
                    }
                }
                for (jj, &w) in s.iter().enumerate() {
                    if w != C::ZERO {
                        let value = p.values.row(b, hk, j0 + jj);
                        for (a, &v) in acc.iter_mut().zip(value) {
                            *a = M::madd(w, v, *a);
                        }
                    }
                }
            }
        }
        for r in 0..rows {
            let acc = &mut dst[r * dv..(r + 1) * dv];
            if !allowed[r] || sum[r] == C::ZERO {
                acc.fill(C::ZERO);
            } else {
                let inv = C::ONE / sum[r];
                for a in acc.iter_mut() {
                    *a = *a * inv;
                }
            }
        }
    }
}
