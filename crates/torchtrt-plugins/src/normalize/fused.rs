//! `normalize` (`x / max(‖x‖ₚ, eps)`): with one reduced run the norm of a block is
//! accumulated and the same block scaled while it is still in cache (rows are scaled in
//! reverse, most recently read first); several reduced runs take the norms from
//! [`super::kernel`] and broadcast them back.

use rayon::prelude::*;

use super::kernel::{Run, accumulate, col_block, few_large_rows, merge, split, split_row_acc};
use super::loops::{col_acc, row_acc, scale_each, scale_run};
use super::reduce::Reduce;
use crate::kernels::{Float, par};

/// The divisor of a `normalize` from an accumulated value (NaN propagates).
#[inline]
fn inverse<R: Reduce>(red: R, acc: f32, eps: f32) -> f32 {
    let n = red.finish(acc);
    1.0 / if n < eps { eps } else { n }
}

pub(super) fn normalize_with<T: Float, R: Reduce>(
    x: &[T],
    shape: &[usize],
    reduce: &[bool],
    red: R,
    eps: f32,
    y: &mut [T],
) {
    if x.is_empty() {
        return;
    }
    let runs = merge(shape, reduce);
    let reduced: Vec<usize> = (0..runs.len()).filter(|&k| runs[k].1).collect();
    match reduced[..] {
        [k] => {
            let (_, r, inner) = split(&runs, k);
            if inner == 1 {
                normalize_rows(x, y, r, red, eps);
            } else {
                normalize_cols(x, y, r, inner, red, eps);
            }
        }
        _ => {
            let inv: Vec<f32> = accumulate(x, shape, reduce, red)
                .into_iter()
                .map(|a| inverse(red, a, eps))
                .collect();
            broadcast_scale(x, y, &runs, &inv);
        }
    }
}

/// `normalize` over contiguous rows of length `r`.
fn normalize_rows<T: Float, R: Reduce>(x: &[T], y: &mut [T], r: usize, red: R, eps: f32) {
    let elt = std::mem::size_of::<T>();
    let rows = x.len() / r;
    if few_large_rows(rows, r * elt) {
        for (y, x) in y.chunks_mut(r).zip(x.chunks(r)) {
            let s = inverse(red, split_row_acc(x, red) as f32, eps);
            let chunk = par::chunk_len(r, elt);
            y.par_chunks_mut(chunk)
                .zip(x.par_chunks(chunk))
                .for_each(|(y, x)| scale_run(x, y, s));
        }
        return;
    }
    let group = par::chunk_len(rows, r * elt) * r;
    y.par_chunks_mut(group)
        .zip(x.par_chunks(group))
        .for_each(|(y, x)| {
            for (y, x) in y.chunks_mut(r).zip(x.chunks(r)) {
                scale_run(x, y, inverse(red, row_acc(x, red) as f32, eps));
            }
        });
}

/// `normalize` over the middle dimension of `[outer, r, inner]`, block by block of columns.
fn normalize_cols<T: Float, R: Reduce>(
    x: &[T],
    y: &mut [T],
    r: usize,
    inner: usize,
    red: R,
    eps: f32,
) {
    let elt = std::mem::size_of::<T>();
    let slab = r * inner;
    let cb = col_block(r, inner, elt);
    if cb == inner {
        let group = par::chunk_len(x.len() / slab, slab * elt) * slab;
        y.par_chunks_mut(group)
            .zip(x.par_chunks(group))
            .for_each(|(y, x)| {
                let mut inv = vec![0f32; inner];
                for (y, x) in y.chunks_mut(slab).zip(x.chunks(slab)) {
                    col_acc(x, inner, r, red, &mut inv);
                    inv.iter_mut().for_each(|a| *a = inverse(red, *a, eps));
                    for (y, x) in y.chunks_mut(inner).zip(x.chunks(inner)).rev() {
                        scale_each(x, y, &inv);
                    }
                }
            });
        return;
    }
    let blocks = inner.div_ceil(cb);
    let mut tasks: Vec<Vec<&mut [T]>> = Vec::new();
    for slab_y in y.chunks_mut(slab) {
        let first = tasks.len();
        tasks.extend((0..blocks).map(|_| Vec::with_capacity(r)));
        for row in slab_y.chunks_mut(inner) {
            for (b, seg) in row.chunks_mut(cb).enumerate() {
                tasks[first + b].push(seg);
            }
        }
    }
    tasks.into_par_iter().enumerate().for_each(|(t, mut segs)| {
        let (o, b) = (t / blocks, t % blocks);
        let start = o * slab + b * cb;
        let width = segs.first().map_or(0, |s| s.len());
        let mut inv = vec![0f32; width];
        col_acc(&x[start..], inner, r, red, &mut inv);
        inv.iter_mut().for_each(|a| *a = inverse(red, *a, eps));
        for (i, seg) in segs.iter_mut().enumerate().rev() {
            scale_each(&x[start + i * inner..start + i * inner + width], seg, &inv);
        }
    });
}

/// `y = x * inv[kept index]` for any pattern of kept and reduced runs.
fn broadcast_scale<T: Float>(x: &[T], y: &mut [T], runs: &[Run], inv: &[f32]) {
    let Some(&(last, last_reduced)) = runs.last() else {
        return;
    };
    let mut strides = vec![0usize; runs.len()];
    let mut s = 1;
    for (k, &(d, reduced)) in runs.iter().enumerate().rev() {
        if !reduced {
            strides[k] = s;
            s *= d;
        }
    }
    let outer_runs = &runs[..runs.len() - 1];
    let rows = par::chunk_len(x.len() / last, last * std::mem::size_of::<T>());
    y.par_chunks_mut(rows * last)
        .zip(x.par_chunks(rows * last))
        .enumerate()
        .for_each(|(c, (y, x))| {
            for (i, (y, x)) in y.chunks_mut(last).zip(x.chunks(last)).enumerate() {
                let mut row = c * rows + i;
                let mut off = 0;
                for (k, &(d, _)) in outer_runs.iter().enumerate().rev() {
                    off += (row % d) * strides[k];
                    row /= d;
                }
                if last_reduced {
                    scale_run(x, y, inv[off]);
                } else {
                    scale_each(x, y, &inv[off..off + last]);
                }
            }
        });
}
