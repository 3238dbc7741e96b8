//! Float reductions over leading or middle axes (`inner > 1`): each output row accumulates
//! its reduced rows element by element, vectorised along the kept inner axis. Work is
//! spread over blocks of columns; when there are too few, the reduced rows are split into
//! parts accumulated in parallel and merged.

use rayon::prelude::*;
use torchtrt_core::layers::ReduceOp;

use super::fold::{Fold, L1Of, MaxOf, MinOf, ProdOf, SquaresOf, SumOf, fold_rows, log_sum_exp};
use super::plan::ReducePlan;
use crate::parallel::MIN_TASK;
use crate::scalar::Real;
use crate::simd::multiversion;

/// Reduces `plan` (which has `inner > 1`) into `out` (`rows × inner`).
pub(crate) fn reduce_columns<C: Real>(plan: &ReducePlan, op: ReduceOp, x: &[C], out: &mut [C]) {
    match op {
        ReduceOp::Sum => columns(SumOf { mean: false }, plan, x, out),
        ReduceOp::Mean => columns(SumOf { mean: true }, plan, x, out),
        ReduceOp::Max => columns(MaxOf, plan, x, out),
        ReduceOp::Min => columns(MinOf, plan, x, out),
        ReduceOp::Prod => columns(ProdOf, plan, x, out),
        ReduceOp::L1 => columns(L1Of, plan, x, out),
        ReduceOp::L2 => columns(SquaresOf { root: true }, plan, x, out),
        ReduceOp::SumSquare => columns(SquaresOf { root: false }, plan, x, out),
        ReduceOp::LogSumExp => {
            let blocks = Blocks::new(plan, 1);
            blocks.run(out, |item, dst| log_sum_exp_block(x, plan, item, dst));
        }
    }
}

/// One block of one output row, reducing the reduced rows `starts`.
#[derive(Clone)]
pub(crate) struct Item {
    /// Input offset of the block's first column.
    pub(crate) base: usize,
    /// The reduced rows this item folds (indices into the plan's `starts`).
    pub(crate) starts: std::ops::Range<usize>,
}

/// The output of a column reduction cut into blocks of columns (and, for the partial
/// results of a split reduction, parts of the reduced rows).
pub(crate) struct Blocks {
    items: Vec<Item>,
    /// Output elements of each item, in item order.
    lens: Vec<usize>,
    /// Work (elements read) per item.
    work: usize,
}

impl Blocks {
    /// Blocks of at most a few thousand columns, small enough for about four tasks per
    /// thread where the rows allow; `parts` splits of the reduced rows.
    pub(crate) fn new(plan: &ReducePlan, parts: usize) -> Blocks {
        let threads = rayon::current_num_threads();
        let (rows, inner, count) = (plan.rows(), plan.inner, plan.starts.len());
        let wanted = (threads * 4).div_ceil(rows * parts).max(1);
        let width = inner.div_ceil(wanted).next_multiple_of(64).clamp(64, 4096);
        let width = width.min(inner);
        let mut items = Vec::new();
        let mut lens = Vec::new();
        for p in 0..parts {
            let starts = p * count / parts..(p + 1) * count / parts;
            for row in plan.outer.range(0..rows) {
                for j in (0..inner).step_by(width) {
                    items.push(Item {
                        base: row + j,
                        starts: starts.clone(),
                    });
                    lens.push(width.min(inner - j));
                }
            }
        }
        Blocks {
            items,
            lens,
            work: width * count.div_ceil(parts),
        }
    }

    /// Runs `f(item, dst)` for every item, `dst` being the item's slice of `out`, in
    /// parallel tasks of at least [`MIN_TASK`] elements read.
    pub(crate) fn run<C: Send>(&self, out: &mut [C], f: impl Fn(&Item, &mut [C]) + Sync) {
        let mut slices: Vec<(&Item, &mut [C])> = Vec::with_capacity(self.items.len());
        let mut rest = out;
        for (item, &len) in self.items.iter().zip(&self.lens) {
            let (head, tail) = rest.split_at_mut(len);
            slices.push((item, head));
            rest = tail;
        }
        let threads = rayon::current_num_threads();
        let per_task = (MIN_TASK / self.work.max(1))
            .max(slices.len().div_ceil(threads * 4))
            .max(1);
        if threads == 1 || slices.len() <= per_task {
            slices.into_iter().for_each(|(item, dst)| f(item, dst));
            return;
        }
        slices
            .par_chunks_mut(per_task)
            .for_each(|batch| batch.iter_mut().for_each(|(item, dst)| f(item, dst)));
    }
}

/// The reduction of every column, split over the reduced rows when the columns alone give
/// too few tasks.
fn columns<C: Real, F: Fold<C>>(f: F, plan: &ReducePlan, x: &[C], out: &mut [C]) {
    let count = plan.starts.len();
    let threads = rayon::current_num_threads();
    let whole = Blocks::new(plan, 1);
    let parts = if whole.items.len() >= threads * 2 {
        1
    } else {
        (threads * 4)
            .div_ceil(whole.items.len())
            .min(count * plan.inner / MIN_TASK)
            .max(1)
    };
    if parts == 1 {
        whole.run(out, |item, dst| fold_block(f, x, plan, item, true, dst));
        return;
    }
    let mut partial = vec![f.init(); parts * out.len()];
    Blocks::new(plan, parts).run(&mut partial, |item, dst| {
        fold_block(f, x, plan, item, false, dst)
    });
    let (first, rest) = partial.split_at(out.len());
    out.copy_from_slice(first);
    for part in rest.chunks_exact(out.len()) {
        for (d, &p) in out.iter_mut().zip(part) {
            *d = f.merge(*d, p);
        }
    }
    for d in out.iter_mut() {
        *d = f.finish(*d, count);
    }
}

multiversion! {
    /// Folds the item's reduced rows into `dst`, finished or left as accumulators.
    fn fold_block<C: Real, F: Fold<C>>(
        f: F,
        x: &[C],
        plan: &ReducePlan,
        item: &Item,
        finish: bool,
        dst: &mut [C],
    ) {
        let n = dst.len();
        dst.fill(f.init());
        let starts = plan.starts.range(item.starts.clone());
        let mut done = 0;
        if n <= SHORT_COLUMNS {
            done = fold_in_registers::<C, F, 32>(f, x, item.base, starts.clone(), dst, done);
            done = fold_in_registers::<C, F, 8>(f, x, item.base, starts.clone(), dst, done);
        }
        let (base, rest) = (item.base + done, &mut dst[done..]);
        let m = rest.len();
        fold_rows(f, rest, starts.map(|s| &x[base + s..base + s + m]));
        if finish {
            let count = plan.starts.len();
            for d in dst.iter_mut() {
                *d = f.finish(*d, count);
            }
        }
    }
}

/// Most columns of an item that [`fold_in_registers`] takes: below this, a pass of
/// [`fold_rows`] over `dst` per four rows costs more than the rows' own arithmetic, while
/// each block of columns in registers reads the rows once more (from cache).
const SHORT_COLUMNS: usize = 256;

/// Folds the reduced rows at `starts` (offsets from `base`) into `dst`'s columns from
/// `from` on, `W` at a time in registers, each block over every row before the next (the
/// same order of steps per column as [`fold_rows`]); returns the first column not folded.
#[inline(always)]
fn fold_in_registers<C: Real, F: Fold<C>, const W: usize>(
    f: F,
    x: &[C],
    base: usize,
    starts: impl Iterator<Item = usize> + Clone,
    dst: &mut [C],
    mut from: usize,
) -> usize {
    while from + W <= dst.len() {
        let mut acc: [C; W] = std::array::from_fn(|j| dst[from + j]);
        for s in starts.clone() {
            let row = &x[base + s + from..][..W];
            for (a, &v) in acc.iter_mut().zip(row) {
                *a = f.step(*a, v);
            }
        }
        dst[from..from + W].copy_from_slice(&acc);
        from += W;
    }
    from
}

multiversion! {
    /// `ln Σ eˣ` of the item's columns, shifted by each column's maximum.
    fn log_sum_exp_block<C: Real>(x: &[C], plan: &ReducePlan, item: &Item, dst: &mut [C]) {
        let n = dst.len();
        let rows = || plan.starts.range(item.starts.clone()).map(|s| &x[item.base + s..item.base + s + n]);
        dst.fill(C::NEG_INFINITY);
        fold_rows(MaxOf, dst, rows());
        let mut sums = vec![C::ZERO; n];
        for row in rows() {
            for ((s, &m), &v) in sums.iter_mut().zip(dst.iter()).zip(row) {
                *s = *s + (v - m).exp_with::<M>();
            }
        }
        for (d, &s) in dst.iter_mut().zip(&sums) {
            *d = log_sum_exp(*d, s);
        }
    }
}
