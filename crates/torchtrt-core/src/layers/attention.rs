//! Scaled dot-product attention (ONNX `Attention`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, require_float};

/// `softmax(Q·Kᵀ · scale + mask) · V` per batch and head, never materialising more than a
/// block of the score matrix (ONNX `Attention-23`).
///
/// Inputs: `q`, `k`, `v`, then the mask when `mask` is set, then the past keys and values
/// when `past` is set, then the i64 `[batch]` counts of valid keys when `nonpad` is set
/// (ONNX `nonpad_kv_seqlen`; keys from the count on are masked). Rank-4 inputs are `[batch, heads, seq, head]`; rank-3 inputs are
/// `[batch, seq, heads · head]` with the head counts `q_heads` and `kv_heads`. Query head
/// `h` reads key/value head `h / (q_heads / kv_heads)` (grouped-query attention). Past keys
/// and values (`[batch, kv_heads, past, head]`) come before the new ones. The mask is bool
/// (true attends) or of the inputs' dtype (added to the scores), broadcasts to
/// `[batch, q_heads, q_seq, mask_len]` with `mask_len` at most the number of keys; keys past
/// it are masked. `causal` lets query `i` attend key `j` only when `j ≤ i + offset`, the
/// offset being the past length, or with `nonpad` the batch's valid keys less the query
/// length; a window keeps keys with `offset + i − left ≤ j ≤ offset + i + right` (bounds
/// below 0 are unbounded). With
/// `softcap > 0` the scores become `softcap · tanh(scores / softcap)` before the mask. A
/// query that may attend no key gets zeros. The output has the query's layout with the
/// value's head size. With `scores` set, a second output holds the score matrix
/// `[batch, q_heads, q_seq, keys]` at that stage (ONNX `qk_matmul_output`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attention {
    /// Query heads of rank-3 inputs; 0 for rank-4 inputs.
    pub q_heads: usize,
    /// Key/value heads of rank-3 inputs; 0 for rank-4 inputs.
    pub kv_heads: usize,
    /// Multiplies the scores; `None` for `1 / √head`.
    pub scale: Option<f32>,
    /// Mask keys after each query's position (offset by the past length).
    pub causal: bool,
    /// Soft cap of the scores; 0 for none.
    pub softcap: f32,
    /// Input 3 is a mask.
    pub mask: bool,
    /// Past keys and values follow (the mask).
    pub past: bool,
    /// The last input holds each batch's count of valid keys.
    pub nonpad: bool,
    /// Keys attended before a query's position; negative for all.
    pub left_window: i64,
    /// Keys attended after a query's position; negative for all.
    pub right_window: i64,
    /// Also output the score matrix at this stage.
    pub scores: Option<ScoreStage>,
}

/// The stage of the score matrix an [`Attention`] layer also outputs (ONNX
/// `qk_matmul_output_mode`: 0 and 1 are `Product`, 2 `Biased`, 3 `Weights`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScoreStage {
    /// `Q·Kᵀ · scale`, soft-capped when `softcap > 0`.
    Product,
    /// The product plus the mask and the causal, window and valid-key rules (`−∞` where a
    /// key may not be attended).
    Biased,
    /// The softmax of the biased scores; zeros for a query that may attend no key.
    Weights,
}

impl ScoreStage {
    /// The stage of an ONNX `qk_matmul_output_mode`.
    pub fn from_onnx(mode: i64) -> Option<ScoreStage> {
        match mode {
            0 | 1 => Some(ScoreStage::Product),
            2 => Some(ScoreStage::Biased),
            3 => Some(ScoreStage::Weights),
            _ => None,
        }
    }
}

impl Default for Attention {
    fn default() -> Attention {
        Attention {
            q_heads: 0,
            kv_heads: 0,
            scale: None,
            causal: false,
            softcap: 0.0,
            mask: false,
            past: false,
            nonpad: false,
            left_window: -1,
            right_window: -1,
            scores: None,
        }
    }
}

impl Attention {
    /// The position of the past keys among the inputs.
    pub fn past_input(&self) -> usize {
        3 + usize::from(self.mask)
    }

    /// The position of the valid-key counts among the inputs.
    pub fn nonpad_input(&self) -> usize {
        self.past_input() + 2 * usize::from(self.past)
    }

    /// The number of inputs.
    pub fn input_count(&self) -> usize {
        self.nonpad_input() + usize::from(self.nonpad)
    }

    /// Whether query `i` may attend key `j` given the offset of its block (past length or
    /// valid keys less the query length) and the batch's valid keys.
    pub fn allows(&self, i: i64, j: i64, offset: i64, valid: i64) -> bool {
        let diff = i + offset - j;
        j < valid
            && !(self.causal && diff < 0)
            && !(self.left_window >= 0 && diff > self.left_window)
            && !(self.right_window >= 0 && -diff > self.right_window)
    }

    /// The keys query `i` may attend, as the range `lo..hi` ([`Attention::allows`] holds
    /// exactly for the `j` in it; `lo ≥ hi` when none).
    pub fn keys_allowed(&self, i: i64, offset: i64, valid: i64) -> (i64, i64) {
        let at = i.saturating_add(offset);
        let mut hi = valid;
        if self.causal {
            hi = hi.min(at.saturating_add(1));
        }
        if self.right_window >= 0 {
            hi = hi.min(at.saturating_add(self.right_window).saturating_add(1));
        }
        let lo = if self.left_window >= 0 {
            at.saturating_sub(self.left_window)
        } else {
            i64::MIN
        };
        (lo, hi)
    }
}

/// Heads and head size of one operand: `(batch, heads, seq, head)` as dims.
fn split(t: &[DimExpr], heads: usize, what: &str) -> Result<[DimExpr; 4], String> {
    match (t, heads) {
        ([b, h, s, d], 0) => Ok([b.clone(), h.clone(), s.clone(), d.clone()]),
        ([b, s, hidden], n) if n > 0 => {
            if let Some(v) = hidden.as_const()
                && v % n as i64 != 0
            {
                return Err(format!(
                    "{what} hidden size {v} is not a multiple of {n} heads"
                ));
            }
            Ok([
                b.clone(),
                DimExpr::Const(n as i64),
                s.clone(),
                hidden.clone().floor_div(n as i64),
            ])
        }
        _ => Err(format!(
            "{what} must be [batch, heads, seq, head] or, with head counts, [batch, seq, hidden]; \
             got {}",
            format_shape(t)
        )),
    }
}

fn differ(a: &DimExpr, b: &DimExpr) -> bool {
    matches!((a.as_const(), b.as_const()), (Some(x), Some(y)) if x != y)
}

impl LayerOp for Attention {
    fn kind(&self) -> &'static str {
        "Attention"
    }
    fn arity(&self) -> (usize, usize) {
        (3, 6)
    }
    fn num_outputs(&self) -> usize {
        1 + usize::from(self.scores.is_some())
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let want = self.input_count();
        if inputs.len() != want {
            return Err(format!(
                "Attention with mask {}, past {} and nonpad {} takes {want} inputs, got {}",
                self.mask,
                self.past,
                self.nonpad,
                inputs.len()
            ));
        }
        if self.past && self.nonpad {
            return Err("past keys and valid-key counts exclude each other".into());
        }
        if self.nonpad {
            let n = &inputs[self.nonpad_input()];
            if n.dtype != DType::I64 || n.shape.len() != 1 {
                return Err(format!(
                    "the valid-key counts must be i64[batch], got {}{}",
                    n.dtype,
                    format_shape(n.shape)
                ));
            }
        }
        let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
        require_float("Attention", q.dtype)?;
        if k.dtype != q.dtype || v.dtype != q.dtype {
            return Err(format!(
                "q, k and v must share one dtype, got {}, {} and {}",
                q.dtype, k.dtype, v.dtype
            ));
        }
        if (self.q_heads == 0) != (self.kv_heads == 0) {
            return Err("q_heads and kv_heads are both set (rank 3) or both 0 (rank 4)".into());
        }
        let [qb, qh, qs, qd] = split(q.shape, self.q_heads, "q")?;
        let [kb, kh, ks, kd] = split(k.shape, self.kv_heads, "k")?;
        let [vb, vh, vs, vd] = split(v.shape, self.kv_heads, "v")?;
        if q.shape.len() != k.shape.len() || q.shape.len() != v.shape.len() {
            return Err("q, k and v must have one rank".into());
        }
        if differ(&qb, &kb) || differ(&qb, &vb) || differ(&kh, &vh) || differ(&ks, &vs) {
            return Err(format!(
                "q {}, k {} and v {} do not agree on batch, heads or key length",
                format_shape(q.shape),
                format_shape(k.shape),
                format_shape(v.shape)
            ));
        }
        if differ(&qd, &kd) {
            return Err(format!("q and k head sizes differ: {qd} and {kd}"));
        }
        if let (Some(a), Some(b)) = (qh.as_const(), kh.as_const())
            && (b == 0 || a % b != 0)
        {
            return Err(format!(
                "{a} query heads are not a multiple of {b} key/value heads"
            ));
        }
        if self.mask {
            let m = &inputs[3];
            if m.dtype != DType::Bool && m.dtype != q.dtype {
                return Err(format!(
                    "the mask must be bool or {}, got {}",
                    q.dtype, m.dtype
                ));
            }
            if m.shape.len() > 4 || m.shape.is_empty() {
                return Err(format!(
                    "the mask must have rank 1 to 4, got {}",
                    format_shape(m.shape)
                ));
            }
        }
        if self.past {
            let at = self.past_input();
            let (pk, pv) = (&inputs[at], &inputs[at + 1]);
            for (t, head, what) in [(pk, &kd, "past keys"), (pv, &vd, "past values")] {
                let ok = t.dtype == q.dtype
                    && t.shape.len() == 4
                    && !differ(&t.shape[0], &qb)
                    && !differ(&t.shape[1], &kh)
                    && !differ(&t.shape[3], head);
                if !ok {
                    return Err(format!(
                        "{what} must be {}[batch, kv_heads, past, head], got {}{}",
                        q.dtype,
                        t.dtype,
                        format_shape(t.shape)
                    ));
                }
            }
            if differ(&pk.shape[2], &pv.shape[2]) {
                return Err("past keys and values differ in length".into());
            }
        }
        if !self.softcap.is_finite() || self.softcap < 0.0 {
            return Err(format!("softcap {} must be finite and ≥ 0", self.softcap));
        }
        let shape = if self.q_heads == 0 {
            vec![qb.clone(), qh.clone(), qs.clone(), vd]
        } else {
            vec![qb.clone(), qs.clone(), vd * self.q_heads as i64]
        };
        let mut out = vec![TypeShape::new(q.dtype, shape)];
        if self.scores.is_some() {
            let keys = match self.past {
                true => inputs[self.past_input()].shape[2].clone() + ks,
                false => ks,
            };
            out.push(TypeShape::new(q.dtype, vec![qb, qh, qs, keys]));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Attention;

    #[test]
    fn keys_allowed_is_the_range_allows_holds_on() {
        for causal in [false, true] {
            for left_window in [-1, 0, 1, 3] {
                for right_window in [-1, 0, 2] {
                    let l = Attention {
                        causal,
                        left_window,
                        right_window,
                        ..Attention::default()
                    };
                    for (i, offset, valid) in (0..6)
                        .flat_map(|i| [-3, 0, 2].map(|o| (i, o)))
                        .flat_map(|(i, o)| [0, 3, 8].map(|v| (i, o, v)))
                    {
                        let (lo, hi) = l.keys_allowed(i, offset, valid);
                        for j in -10..20 {
                            assert_eq!(
                                l.allows(i, j, offset, valid),
                                lo <= j && j < hi,
                                "{l:?} i {i} offset {offset} valid {valid} j {j}"
                            );
                        }
                    }
                }
            }
        }
    }
}
