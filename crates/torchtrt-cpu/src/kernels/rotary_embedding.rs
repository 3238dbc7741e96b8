//! RotaryEmbedding: each head's first `rotary` features rotated pairwise by the angles of
//! its position, rows in parallel.

use torchtrt_core::layers::{RotaryDims, RotaryEmbedding};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_float;
use crate::parallel::for_each_rows;
use crate::scalar::{FloatElem, Real};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "RotaryEmbedding";

struct RotaryKernel {
    layer: RotaryEmbedding,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &RotaryEmbedding,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(RotaryKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// Where each row's angles start in the caches, rows in the input's memory order.
fn angle_rows(
    layer: &RotaryEmbedding,
    d: RotaryDims,
    cache_rows: usize,
    positions: Option<&Tensor>,
) -> Result<Vec<usize>, String> {
    let half = d.rotary / 2;
    let pos = match positions {
        Some(p) => {
            if p.shape() != [d.batch, d.seq] {
                return Err(format!(
                    "{WHAT}: position_ids {p} must be [{}, {}]",
                    d.batch, d.seq
                ));
            }
            let v = p
                .to_i64_vec()
                .ok_or_else(|| format!("{WHAT}: position_ids must be integers, got {p}"))?;
            if let Some(bad) = v.iter().find(|&&i| i < 0 || i as usize >= cache_rows) {
                return Err(format!(
                    "{WHAT}: position id {bad} is outside the caches' {cache_rows} positions"
                ));
            }
            Some(v)
        }
        None => None,
    };
    let angle = |b: usize, s: usize| match &pos {
        Some(v) => v[b * d.seq + s] as usize * half,
        None => (b * d.seq + s) * half,
    };
    let mut rows = Vec::with_capacity(d.batch * d.heads * d.seq);
    for b in 0..d.batch {
        if layer.num_heads == 0 {
            for _ in 0..d.heads {
                rows.extend((0..d.seq).map(|s| angle(b, s)));
            }
        } else {
            for s in 0..d.seq {
                rows.extend(std::iter::repeat_n(angle(b, s), d.heads));
            }
        }
    }
    Ok(rows)
}

impl Kernel for RotaryKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 3..=4, 1)?;
        let (x, cos, sin) = (inputs[0], inputs[1], inputs[2]);
        for t in [x, cos, sin] {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let d = self
            .layer
            .dims(x.shape())
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let half = d.rotary / 2;
        let cache_rows = match (inputs.get(3), cos.shape()) {
            (Some(_), &[n, h]) | (None, &[_, n, h]) if h == half => n,
            _ => 0,
        };
        let want: Vec<usize> = match inputs.get(3) {
            Some(_) => vec![cache_rows, half],
            None => vec![d.batch, d.seq, half],
        };
        if cos.shape() != want.as_slice() || sin.shape() != want.as_slice() {
            return Err(format!(
                "{WHAT}: caches {cos} and {sin} must be {want:?} for input {x}"
            ));
        }
        let starts = angle_rows(&self.layer, d, cache_rows, inputs.get(3).copied())?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        let interleaved = self.layer.interleaved;
        with_float!(self.dtype, WHAT, T => {
            let mut bufs: [Vec<<T as FloatElem>::C>; 3] = Default::default();
            let [xb, cb, sb] = &mut bufs;
            let xc = T::view(elems::<T>(x)?, xb);
            let cc = T::view(elems::<T>(cos)?, cb);
            let sc = T::view(elems::<T>(sin)?, sb);
            T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                for_each_rows(oc, d.head, 4 * d.head, |first, rows| {
                    for (j, row) in rows.chunks_exact_mut(d.head).enumerate() {
                        let r = first + j;
                        let src = &xc[r * d.head..(r + 1) * d.head];
                        let at = starts[r];
                        rotate(src, row, &cc[at..at + half], &sc[at..at + half], interleaved);
                    }
                });
            });
            Ok(())
        })
    }
}

/// One head's features rotated by `cos`/`sin` (`rotary / 2` angles), the rest copied.
fn rotate<C: Real>(x: &[C], out: &mut [C], cos: &[C], sin: &[C], interleaved: bool) {
    let half = cos.len();
    let rotary = 2 * half;
    for i in 0..half {
        let (ia, ib) = if interleaved {
            (2 * i, 2 * i + 1)
        } else {
            (i, i + half)
        };
        let (a, b, c, s) = (x[ia], x[ib], cos[i], sin[i]);
        out[ia] = a * c - b * s;
        out[ib] = a * s + b * c;
    }
    out[rotary..].copy_from_slice(&x[rotary..]);
}
