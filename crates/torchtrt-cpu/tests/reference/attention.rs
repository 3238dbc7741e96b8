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

/// Where the keys of a query lie and what it may attend: the mask `bias(b, h, i, j)`,
/// and per batch the causal `offset` and the `valid` keys.
pub struct Keys<'a> {
    pub bias: &'a dyn Fn(usize, usize, usize, usize) -> f64,
    pub offset: &'a dyn Fn(usize) -> i64,
    pub valid: &'a dyn Fn(usize) -> i64,
}

/// The scores of query `(b, h, i)` against every key: the scaled, soft-capped products,
/// and the biases (the mask, or −∞ where the rules forbid the key).
fn score_row(
    q: &Nd,
    k: &Nd,
    rules: &Rules,
    keys: &Keys<'_>,
    [b, h, i]: [usize; 3],
) -> (Vec<f64>, Vec<f64>) {
    let (d, group) = (q.shape[3], q.shape[1] / k.shape[1]);
    (0..k.shape[2])
        .map(|j| {
            let mut s: f64 = (0..d)
                .map(|t| q.at(&[b, h, i, t]) * k.at(&[b, h / group, j, t]))
                .sum::<f64>()
                * rules.scale;
            if rules.softcap > 0.0 {
                s = rules.softcap * (s / rules.softcap).tanh();
            }
            let diff = i as i64 + (keys.offset)(b) - j as i64;
            let allowed = (j as i64) < (keys.valid)(b)
                && !(rules.causal && diff < 0)
                && !(rules.window.0 >= 0 && diff > rules.window.0)
                && !(rules.window.1 >= 0 && -diff > rules.window.1);
            let bv = if allowed {
                (keys.bias)(b, h, i, j)
            } else {
                f64::NEG_INFINITY
            };
            (s, bv)
        })
        .unzip()
}

/// The softmax weights of biased scores; `None` when no key may be attended.
fn weights(products: &[f64], biases: &[f64]) -> Option<Vec<f64>> {
    let scores: Vec<f64> = products.iter().zip(biases).map(|(s, b)| s + b).collect();
    let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if biases.iter().all(|&b| b == f64::NEG_INFINITY) || m == f64::NEG_INFINITY {
        return None;
    }
    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
    let total: f64 = e.iter().sum();
    Some(e.iter().map(|x| x / total).collect())
}

/// `softmax(q·kᵀ·scale + bias)·v` per batch and head (grouped heads read head
/// `h / (heads / kv_heads)`). Rows with no attendable key give zeros.
pub fn attention(q: &Nd, k: &Nd, v: &Nd, rules: &Rules, keys: &Keys<'_>) -> Nd {
    let (hq, dv, group) = (q.shape[1], v.shape[3], q.shape[1] / k.shape[1]);
    let mut out = Nd::from_fn(vec![q.shape[0], hq, q.shape[2], dv], |_| 0.0);
    for b in 0..q.shape[0] {
        for h in 0..hq {
            for i in 0..q.shape[2] {
                let (products, biases) = score_row(q, k, rules, keys, [b, h, i]);
                let Some(w) = weights(&products, &biases) else {
                    continue;
                };
                for t in 0..dv {
                    let y: f64 = (0..w.len())
                        .map(|j| w[j] * v.at(&[b, h / group, j, t]))
                        .sum();
                    out.data[super::ravel(&[b, h, i, t], &out.shape)] = y;
                }
            }
        }
    }
    out
}

/// The score matrix `[batch, q_heads, q_seq, keys]` at `stage`: 0 the products, 1 with the
/// biases, 2 the softmax weights (zeros for rows with no attendable key).
pub fn scores(q: &Nd, k: &Nd, rules: &Rules, keys: &Keys<'_>, stage: u8) -> Nd {
    let n = k.shape[2];
    let mut out = Nd::from_fn(vec![q.shape[0], q.shape[1], q.shape[2], n], |_| 0.0);
    for b in 0..q.shape[0] {
        for h in 0..q.shape[1] {
            for i in 0..q.shape[2] {
                let (products, biases) = score_row(q, k, rules, keys, [b, h, i]);
                let row: Vec<f64> = match stage {
                    0 => products,
                    1 => products.iter().zip(&biases).map(|(s, b)| s + b).collect(),
                    _ => weights(&products, &biases).unwrap_or_else(|| vec![0.0; n]),
                };
                let at = super::ravel(&[b, h, i, 0], &out.shape);
                out.data[at..at + n].copy_from_slice(&row);
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
