//! Attention and rotary embeddings by their definitions, in `[batch, heads, seq, head]`.

use super::Nd;

/// What the reference needs of an attention layer besides the tensors.
pub struct Rules {
    /// Multiplies the scores.
    pub scale: f64,
    /// Soft cap (0: none).
    pub softcap: f64,
    /// Causal masking.
    pub causal: bool,
    /// Window bounds (negative: unbounded).
    pub window: (i64, i64),
}

/// `softmax(q·kᵀ·scale + bias)·v` per batch and head (grouped heads read head
/// `h / (heads / kv_heads)`); `bias(b, h, i, j)` is the mask; `offset` and `valid` per batch
/// place the causal frontier and the valid keys. Rows with no attendable key give zeros.
pub fn attention(
    q: &Nd,
    k: &Nd,
    v: &Nd,
    rules: &Rules,
    bias: &dyn Fn(usize, usize, usize, usize) -> f64,
    offset: &dyn Fn(usize) -> i64,
    valid: &dyn Fn(usize) -> i64,
) -> Nd {
    let [_, hq, _, d] = [q.shape[0], q.shape[1], q.shape[2], q.shape[3]];
    let (hk, keys, dv) = (k.shape[1], k.shape[2], v.shape[3]);
    let group = hq / hk;
    let mut out = Nd::from_fn(vec![q.shape[0], hq, q.shape[2], dv], |_| 0.0);
    for b in 0..q.shape[0] {
        for h in 0..hq {
            for i in 0..q.shape[2] {
                let mut scores = Vec::with_capacity(keys);
                let mut any = false;
                for j in 0..keys {
                    let mut s: f64 = (0..d)
                        .map(|t| q.at(&[b, h, i, t]) * k.at(&[b, h / group, j, t]))
                        .sum::<f64>()
                        * rules.scale;
                    if rules.softcap > 0.0 {
                        s = rules.softcap * (s / rules.softcap).tanh();
                    }
                    let diff = i as i64 + offset(b) - j as i64;
                    let allowed = (j as i64) < valid(b)
                        && !(rules.causal && diff < 0)
                        && !(rules.window.0 >= 0 && diff > rules.window.0)
                        && !(rules.window.1 >= 0 && -diff > rules.window.1);
                    let bv = if allowed {
                        bias(b, h, i, j)
                    } else {
                        f64::NEG_INFINITY
                    };
                    any |= bv != f64::NEG_INFINITY;
                    scores.push(s + bv);
                }
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if !any || m == f64::NEG_INFINITY {
                    continue;
                }
                let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let total: f64 = e.iter().sum();
                for t in 0..dv {
                    let y: f64 = (0..keys).map(|j| e[j] * v.at(&[b, h / group, j, t])).sum();
                    let at = super::ravel(&[b, h, i, t], &out.shape);
                    out.data[at] = y / total;
                }
            }
        }
    }
    out
}

/// Rotary embedding of `x` (`[batch, heads, seq, head]`), angles `cos`/`sin` of row `(b, s)`
/// given by `angle_row(b, s)` in caches of `rotary / 2` columns.
pub fn rotary(
    x: &Nd,
    cos: &[f64],
    sin: &[f64],
    rotary: usize,
    interleaved: bool,
    angle_row: &dyn Fn(usize, usize) -> usize,
) -> Nd {
    let half = rotary / 2;
    Nd::from_fn(x.shape.clone(), |i| {
        let (b, h, s, f) = (i[0], i[1], i[2], i[3]);
        if f >= rotary {
            return x.at(i);
        }
        let (j, first, partner) = if interleaved {
            (f / 2, f % 2 == 0, f ^ 1)
        } else if f < half {
            (f, true, f + half)
        } else {
            (f - half, false, f - half)
        };
        let at = angle_row(b, s) * half + j;
        let (c, sn) = (cos[at], sin[at]);
        let (v, o) = (x.at(i), x.at(&[b, h, s, partner]));
        if first {
            v * c - o * sn
        } else {
            o * sn + v * c
        }
    })
}
