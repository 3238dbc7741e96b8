//! Gathers and scatters by index tuples, element by element.

use super::{Nd, indices, ravel};

/// The data index of tuple `tuple` (negative entries counting from the end) after the
/// batch index `batch`.
fn resolve(shape: &[usize], batch: &[usize], tuple: &[i64]) -> Vec<usize> {
    let mut at = batch.to_vec();
    for (j, &v) in tuple.iter().enumerate() {
        let d = shape[batch.len() + j] as i64;
        at.push(if v < 0 { v + d } else { v } as usize);
    }
    at
}

/// ONNX `GatherND` of `data` by `idx` (shape `ishape`, last axis the tuples).
pub fn gather_nd(data: &Nd, idx: &[i64], ishape: &[usize], batch_dims: usize) -> Nd {
    let k = ishape[ishape.len() - 1];
    let mut shape = ishape[..ishape.len() - 1].to_vec();
    shape.extend_from_slice(&data.shape[batch_dims + k..]);
    let lead = ishape.len() - 1;
    Nd::from_fn(shape, |o| {
        let t = ravel(&o[..lead], &ishape[..lead]);
        let mut at = resolve(&data.shape, &o[..batch_dims], &idx[t * k..(t + 1) * k]);
        at.extend_from_slice(&o[lead..]);
        data.at(&at)
    })
}

/// ONNX `ScatterND` with `combine(old, update)`, updates applied in row-major order.
pub fn scatter_nd(
    data: &Nd,
    idx: &[i64],
    ishape: &[usize],
    updates: &Nd,
    combine: impl Fn(f64, f64) -> f64,
) -> Nd {
    let k = ishape[ishape.len() - 1];
    let lead = ishape.len() - 1;
    let mut out = data.clone();
    for u in indices(&updates.shape) {
        let t = ravel(&u[..lead], &ishape[..lead]);
        let mut at = resolve(&data.shape, &[], &idx[t * k..(t + 1) * k]);
        at.extend_from_slice(&u[lead..]);
        let flat = ravel(&at, &data.shape);
        out.data[flat] = combine(out.data[flat], updates.at(&u));
    }
    out
}

/// ONNX `NonZero`: `[rank, count]` coordinates of the non-zero elements, row-major.
pub fn non_zero(x: &Nd) -> Nd {
    let hits: Vec<Vec<usize>> = indices(&x.shape).filter(|i| x.at(i) != 0.0).collect();
    let rank = x.shape.len();
    Nd::from_fn(vec![rank, hits.len()], |i| hits[i[1]][i[0]] as f64)
}
