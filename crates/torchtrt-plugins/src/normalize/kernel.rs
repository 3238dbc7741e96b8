//! The norm kernels' entry points and reductions. The shape is first merged into
//! alternating runs of kept and reduced dimensions; each reduced run `[outer, r, inner]` is
//! accumulated across contiguous rows (or along contiguous runs when `inner == 1`), several
//! reduced runs one after another, innermost first. `normalize` is in [`super::fused`].

use rayon::prelude::*;

use super::fused::normalize_with;
use super::loops::{col_acc, row_acc};
use super::reduce::{L1, L2, LInf, Lp, Max, Order, Reduce, Sum, combine64};
use crate::kernels::{Float, par};

/// Bytes of input a column block should span, so a block is re-read from L2.
const BLOCK_BYTES: usize = 512 * 1024;

/// `out` = the `order`-norm of `x` (dimensions `shape`) over the dimensions where `reduce`
/// is true; `out` holds the kept dimensions in order.
pub(crate) fn norm<T: Float>(
    x: &[T],
    shape: &[usize],
    reduce: &[bool],
    order: Order,
    out: &mut [T],
) {
    match order {
        Order::One => norm_with(x, shape, reduce, L1, out),
        Order::Two => norm_with(x, shape, reduce, L2, out),
        Order::Inf => norm_with(x, shape, reduce, LInf, out),
        Order::P(p) => norm_with(x, shape, reduce, Lp(p), out),
    }
}

/// `y = x / max(‖x‖, eps)`, the norm taken over the dimensions where `reduce` is true.
pub(crate) fn normalize<T: Float>(
    x: &[T],
    shape: &[usize],
    reduce: &[bool],
    order: Order,
    eps: f32,
    y: &mut [T],
) {
    match order {
        Order::One => normalize_with(x, shape, reduce, L1, eps, y),
        Order::Two => normalize_with(x, shape, reduce, L2, eps, y),
        Order::Inf => normalize_with(x, shape, reduce, LInf, eps, y),
        Order::P(p) => normalize_with(x, shape, reduce, Lp(p), eps, y),
    }
}

/// A run of merged dimensions: its size and whether it is reduced.
pub(super) type Run = (usize, bool);

/// Merges `shape` into alternating runs, dropping size-1 dimensions; always holds at least
/// one reduced run.
pub(super) fn merge(shape: &[usize], reduce: &[bool]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (&d, &r) in shape.iter().zip(reduce) {
        match runs.last_mut() {
            _ if d == 1 => {}
            Some(last) if last.1 == r => last.0 *= d,
            _ => runs.push((d, r)),
        }
    }
    if !runs.iter().any(|r| r.1) {
        runs.push((1, true));
    }
    runs
}

/// `(outer, r, inner)` around the reduced run at `k`.
pub(super) fn split(runs: &[Run], k: usize) -> (usize, usize, usize) {
    let outer = runs[..k].iter().map(|r| r.0).product();
    let inner = runs[k + 1..].iter().map(|r| r.0).product();
    (outer, runs[k].0, inner)
}

fn norm_with<T: Float, R: Reduce>(
    x: &[T],
    shape: &[usize],
    reduce: &[bool],
    red: R,
    out: &mut [T],
) {
    if x.is_empty() {
        out.fill(T::from_f32(0.0));
        return;
    }
    let acc = accumulate(x, shape, reduce, red);
    let chunk = par::chunk_len(out.len(), 4);
    out.par_chunks_mut(chunk)
        .zip(acc.par_chunks(chunk))
        .for_each(|(o, a)| {
            for (o, &a) in o.iter_mut().zip(a) {
                *o = T::from_f32(red.finish(a));
            }
        });
}

/// The accumulated (not yet finished) values over the kept dimensions.
pub(super) fn accumulate<T: Float, R: Reduce>(
    x: &[T],
    shape: &[usize],
    reduce: &[bool],
    red: R,
) -> Vec<f32> {
    let mut runs = merge(shape, reduce);
    let Some(k) = runs.iter().rposition(|r| r.1) else {
        return Vec::new();
    };
    let mut acc = stage(x, split(&runs, k), red);
    drop_run(&mut runs, k);
    while let Some(k) = runs.iter().rposition(|r| r.1) {
        acc = if R::MAX {
            stage(&acc, split(&runs, k), Max)
        } else {
            stage(&acc, split(&runs, k), Sum)
        };
        drop_run(&mut runs, k);
    }
    acc
}

/// Removes the reduced run `k`, merging the kept runs on either side.
fn drop_run(runs: &mut Vec<Run>, k: usize) {
    runs.remove(k);
    if k > 0 && k < runs.len() && runs[k - 1].1 == runs[k].1 {
        runs[k - 1].0 *= runs[k].0;
        runs.remove(k);
    }
}

/// Reduces the middle dimension of `[outer, r, inner]`.
fn stage<S: Float, R: Reduce>(
    src: &[S],
    (outer, r, inner): (usize, usize, usize),
    red: R,
) -> Vec<f32> {
    let mut dst = vec![0f32; outer * inner];
    let elt = std::mem::size_of::<S>();
    if inner == 1 {
        if few_large_rows(outer, r * elt) {
            for (d, row) in dst.iter_mut().zip(src.chunks(r)) {
                *d = split_row_acc(row, red) as f32;
            }
        } else {
            let rows = par::chunk_len(outer, r * elt);
            dst.par_chunks_mut(rows)
                .zip(src.par_chunks(rows * r))
                .for_each(|(d, s)| {
                    for (d, row) in d.iter_mut().zip(s.chunks(r)) {
                        *d = row_acc(row, red) as f32;
                    }
                });
        }
        return dst;
    }
    let slab = r * inner;
    let cb = col_block(r, inner, elt);
    if cb == inner {
        let group = par::chunk_len(outer, slab * elt);
        dst.par_chunks_mut(group * inner)
            .zip(src.par_chunks(group * slab))
            .for_each(|(d, s)| {
                for (d, s) in d.chunks_mut(inner).zip(s.chunks(slab)) {
                    col_acc(s, inner, r, red, d);
                }
            });
    } else {
        dst.par_chunks_mut(inner).enumerate().for_each(|(o, d)| {
            d.par_chunks_mut(cb).enumerate().for_each(|(b, d)| {
                col_acc(&src[o * slab + b * cb..], inner, r, red, d);
            });
        });
    }
    dst
}

/// Whether rows are too few to spread over the pool and long enough to split.
pub(super) fn few_large_rows(rows: usize, row_bytes: usize) -> bool {
    rows < 2 * rayon::current_num_threads() && row_bytes > 2 * par::MIN_TASK_BYTES
}

/// [`row_acc`] of one long row, split over the pool.
pub(super) fn split_row_acc<S: Float, R: Reduce>(row: &[S], red: R) -> f64 {
    let chunk = par::chunk_len(row.len(), std::mem::size_of::<S>());
    row.par_chunks(chunk)
        .map(|c| row_acc(c, red))
        .reduce(|| 0.0, combine64::<R>)
}

/// Columns per block so a block of `r` rows spans about [`BLOCK_BYTES`]; `inner` when the
/// whole slab is that small.
pub(super) fn col_block(r: usize, inner: usize, elt: usize) -> usize {
    let cols = (BLOCK_BYTES / (r * elt).max(1)).max(16) / 16 * 16;
    cols.min(inner)
}
