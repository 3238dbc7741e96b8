//! Float reductions whose reduced elements are runs of consecutive values (`inner == 1`):
//! each output folds its runs through independent lanes. Rows are spread over threads;
//! when there are too few rows, each is split into parts folded in parallel and merged.

use torchtrt_core::layers::ReduceOp;

use super::fold::{
    ExpSumOf, Fold, L1Of, MaxOf, MinOf, ProdOf, SHORT_RUN, SquaresOf, SumOf, fold_run, fold_runs4,
    log_sum_exp,
};
use super::plan::ReducePlan;
use super::short_rows::{self, RowFold};
use crate::parallel::{for_each_rows, split_parts};
use crate::scalar::{Real, as_f32, as_f32_mut};
use crate::scratch::Kept;
use crate::simd::multiversion;

/// Reduces every row of `plan` (which has `inner == 1`) into one element of `out`.
pub(crate) fn reduce_rows<C: Real>(plan: &ReducePlan, op: ReduceOp, x: &[C], out: &mut [C]) {
    if short_f32_rows(plan, op, x, out) {
        return;
    }
    match op {
        ReduceOp::Sum => rows(SumOf { mean: false }, plan, x, out),
        ReduceOp::Mean => rows(SumOf { mean: true }, plan, x, out),
        ReduceOp::Max => rows(MaxOf, plan, x, out),
        ReduceOp::Min => rows(MinOf, plan, x, out),
        ReduceOp::Prod => rows(ProdOf, plan, x, out),
        ReduceOp::L1 => rows(L1Of, plan, x, out),
        ReduceOp::L2 => rows(SquaresOf { root: true }, plan, x, out),
        ReduceOp::SumSquare => rows(SquaresOf { root: false }, plan, x, out),
        ReduceOp::LogSumExp => {
            let count = plan.count();
            for_each_rows(out, 1, 2 * count, |first, dst| {
                log_sum_exp_items(x, plan, first, dst)
            });
        }
    }
}

/// Sums, means, maxima and minima of short f32 rows stored back to back, in registers
/// ([`short_rows`]); `false` (nothing written) for anything else.
fn short_f32_rows<C: Real>(plan: &ReducePlan, op: ReduceOp, x: &[C], out: &mut [C]) -> bool {
    let fold = match op {
        ReduceOp::Sum => RowFold::Sum,
        ReduceOp::Mean => RowFold::Mean,
        ReduceOp::Max => RowFold::Max,
        ReduceOp::Min => RowFold::Min,
        _ => return false,
    };
    let count = plan.count();
    let back_to_back = plan.is_one_run()
        && plan.starts.get(0) == 0
        && plan.rows().checked_mul(count) == Some(x.len())
        && out.len() == plan.rows();
    let (Some(x), Some(out)) = (as_f32(x), as_f32_mut(out)) else {
        return false;
    };
    if !back_to_back || !short_rows::takes(count) {
        return false;
    }
    for_each_rows(out, 1, count, |first, dst| {
        let taken = short_rows::reduce(fold, &x[first * count..], count, dst);
        debug_assert!(taken, "short rows refused {count}");
    });
    true
}

/// The fold of every row, split into parts when there are few rows.
fn rows<C: Real, F: Fold<C>>(f: F, plan: &ReducePlan, x: &[C], out: &mut [C]) {
    let count = plan.count();
    let parts = split_parts(plan.rows(), count);
    if parts == 1 {
        for_each_rows(out, 1, count, |first, dst| {
            fold_items(f, x, plan, 1, first, dst)
        });
        return;
    }
    let mut partial = Kept::<Vec<C>>::shared("partial reductions");
    partial.clear();
    partial.resize(plan.rows() * parts, f.init());
    for_each_rows(&mut partial, 1, count / parts, |first, dst| {
        fold_items(f, x, plan, parts, first, dst)
    });
    for (d, p) in out.iter_mut().zip(partial.chunks_exact(parts)) {
        let acc = p.iter().fold(f.init(), |a, &v| f.merge(a, v));
        *d = f.finish(acc, count);
    }
}

multiversion! {
    /// Folds items `first..first + dst.len()`, item `k` being part `k % parts` of row
    /// `k / parts`; finished when rows are whole (`parts == 1`), else left as partial
    /// accumulators.
    fn fold_items<C: Real, F: Fold<C>>(
        f: F,
        x: &[C],
        plan: &ReducePlan,
        parts: usize,
        first: usize,
        dst: &mut [C],
    ) {
        let count = plan.count();
        if parts == 1 && F::INTERLEAVE_ROWS && plan.is_one_run() && count < SHORT_RUN {
            let start = plan.starts.get(0);
            let mut bases = plan.outer.range(first..plan.rows());
            let mut quads = dst.chunks_exact_mut(4);
            let row = |b: usize| &x[b + start..b + start + count];
            for d in &mut quads {
                let (Some(b0), Some(b1), Some(b2), Some(b3)) =
                    (bases.next(), bases.next(), bases.next(), bases.next())
                else {
                    break;
                };
                let acc = fold_runs4(f, [row(b0), row(b1), row(b2), row(b3)]);
                for (d, acc) in d.iter_mut().zip(acc) {
                    *d = f.finish(acc, count);
                }
            }
            for (d, base) in quads.into_remainder().iter_mut().zip(bases) {
                *d = f.finish(fold_row(f, x, plan, base), count);
            }
            return;
        }
        if parts == 1 {
            for (d, base) in dst.iter_mut().zip(plan.outer.range(first..plan.rows())) {
                *d = f.finish(fold_row(f, x, plan, base), count);
            }
            return;
        }
        for (j, d) in dst.iter_mut().enumerate() {
            let k = first + j;
            let (row, p) = (k / parts, k % parts);
            let span = p * count / parts..(p + 1) * count / parts;
            *d = fold_span(f, f.init(), x, plan, plan.outer.get(row), span);
        }
    }
}

multiversion! {
    /// `ln Σ eˣ` of rows `first..first + dst.len()`, shifted by each row's maximum.
    fn log_sum_exp_items<C: Real>(x: &[C], plan: &ReducePlan, first: usize, dst: &mut [C]) {
        for (d, base) in dst.iter_mut().zip(plan.outer.range(first..plan.rows())) {
            let m = fold_row(MaxOf, x, plan, base);
            let s = fold_row(ExpSumOf::<C, M>::new(m), x, plan, base);
            *d = log_sum_exp(m, s);
        }
    }
}

/// The fold of every reduced element of the row at `base`.
#[inline(always)]
fn fold_row<C: Real, F: Fold<C>>(f: F, x: &[C], plan: &ReducePlan, base: usize) -> C {
    let run = plan.run;
    let mut acc = f.init();
    for s in plan.starts.range(0..plan.starts.len()) {
        acc = fold_run(f, acc, &x[base + s..base + s + run]);
    }
    acc
}

/// `acc` with the reduced elements `span` of the row at `base` folded in (the row's
/// elements numbered run by run).
#[inline(always)]
fn fold_span<C: Real, F: Fold<C>>(
    f: F,
    acc: C,
    x: &[C],
    plan: &ReducePlan,
    base: usize,
    span: std::ops::Range<usize>,
) -> C {
    let run = plan.run;
    let mut acc = acc;
    let mut i = span.start;
    while i < span.end {
        let (s, k) = (i / run, i % run);
        let len = (span.end - i).min(run - k);
        let at = base + plan.starts.get(s) + k;
        acc = fold_run(f, acc, &x[at..at + len]);
        i += len;
    }
    acc
}
