//! Rotary position embeddings (ONNX `RotaryEmbedding`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, require_float};

/// Rotates pairs of features of each head by position-dependent angles (ONNX
/// `RotaryEmbedding-23`). Input 0 is `[batch, heads, seq, head]`, or `[batch, seq,
/// heads · head]` when `num_heads` is set; inputs 1 and 2 are the cosine and sine caches,
/// `[positions, rotary / 2]` looked up by input 3, the i64 position ids `[batch, seq]`, or
/// `[batch, seq, rotary / 2]` without it. The first `rotary` features of each head (all
/// when `rotary_dim` is 0) are rotated, as halves or, when `interleaved`, as even/odd
/// pairs: `(a, b) → (a·cos − b·sin, a·sin + b·cos)`; the rest pass through. A position id
/// out of the cache is an error naming it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RotaryEmbedding {
    /// Pairs are neighbours (`x[2i]`, `x[2i+1]`) instead of halves (`x[i]`, `x[i + r/2]`).
    pub interleaved: bool,
    /// Heads of a rank-3 input; 0 for a rank-4 input.
    pub num_heads: usize,
    /// Features rotated per head; 0 for all.
    pub rotary_dim: usize,
}

/// The dims of a rotary embedding's input: batch, heads, sequence, head size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RotaryDims {
    /// Batch.
    pub batch: usize,
    /// Heads.
    pub heads: usize,
    /// Sequence length.
    pub seq: usize,
    /// Features per head.
    pub head: usize,
    /// Features rotated per head.
    pub rotary: usize,
}

impl RotaryEmbedding {
    /// The dims of a concrete input shape.
    pub fn dims(&self, shape: &[usize]) -> Result<RotaryDims, String> {
        let (batch, heads, seq, head) = match (shape, self.num_heads) {
            (&[b, h, s, d], 0) => (b, h, s, d),
            (&[b, s, hidden], n) if n > 0 => {
                if hidden % n != 0 {
                    return Err(format!(
                        "hidden size {hidden} is not a multiple of {n} heads"
                    ));
                }
                (b, n, s, hidden / n)
            }
            _ => {
                return Err(format!(
                    "the input must be [batch, heads, seq, head], or [batch, seq, hidden] with \
                     num_heads, got {shape:?} with num_heads {}",
                    self.num_heads
                ));
            }
        };
        let rotary = if self.rotary_dim == 0 {
            head
        } else {
            self.rotary_dim
        };
        if rotary > head || rotary % 2 != 0 {
            return Err(format!(
                "rotary_embedding_dim {rotary} must be even and at most the head size {head}"
            ));
        }
        Ok(RotaryDims {
            batch,
            heads,
            seq,
            head,
            rotary,
        })
    }
}

impl LayerOp for RotaryEmbedding {
    fn kind(&self) -> &'static str {
        "RotaryEmbedding"
    }
    fn arity(&self) -> (usize, usize) {
        (3, 4)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("RotaryEmbedding", x.dtype)?;
        let want_rank = if self.num_heads == 0 { 4 } else { 3 };
        if x.shape.len() != want_rank {
            return Err(format!(
                "the input must have rank {want_rank} (num_heads {}), got {}",
                self.num_heads,
                format_shape(x.shape)
            ));
        }
        for (t, what) in inputs[1..3].iter().zip(["cos_cache", "sin_cache"]) {
            if t.dtype != x.dtype {
                return Err(format!("{what} must be {}, got {}", x.dtype, t.dtype));
            }
            let rank = if inputs.len() == 4 { 2 } else { 3 };
            if t.shape.len() != rank {
                return Err(format!(
                    "{what} must have rank {rank}, got {}",
                    format_shape(t.shape)
                ));
            }
        }
        if let Some(p) = inputs.get(3)
            && (!matches!(p.dtype, DType::I64 | DType::I32) || p.shape.len() != 2)
        {
            return Err(format!(
                "position_ids must be a 2-D integer tensor, got {}{}",
                p.dtype,
                format_shape(p.shape)
            ));
        }
        let half = inputs[1].shape.last().and_then(DimExpr::as_const);
        let head = match (x.shape, self.num_heads) {
            ([.., d], 0) => d.as_const(),
            ([.., h], n) => h.as_const().map(|h| h / n as i64),
            _ => None,
        };
        if let (Some(half), Some(head)) = (half, head) {
            let rotary = if self.rotary_dim == 0 {
                head
            } else {
                self.rotary_dim as i64
            };
            if 2 * half != rotary || rotary > head {
                return Err(format!(
                    "the caches hold {half} angles per position; {rotary} rotated features of a \
                     head of {head} need {}",
                    rotary / 2
                ));
            }
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
