//! Normalization over the trailing axes: every row of `count` consecutive elements gets its
//! mean and variance (two passes over the row while it is in cache) and is written at
//! once. Rows too few for the threads are cut into parts: the parts' statistics are merged
//! (Chan's pairwise update), then the parts are written in parallel.

use rayon::prelude::*;

use crate::kernels::reduce::ReducePlan;
use crate::kernels::reduce::fold::{Fold, SumOf, fold_run};
use crate::parallel::{for_each_rows, split_parts};
use crate::scalar::Real;
use crate::simd::multiversion;
use crate::strided::broadcast_strides;

/// How a scale or bias lines up with the rows.
#[derive(Clone, Debug)]
pub(super) enum Layout {
    /// Not given.
    Absent,
    /// One value per row: row `r` reads element `offsets[r]`.
    PerRow(Vec<usize>),
    /// The same `count` values for every row, one per normalized element.
    PerElement,
}

/// The layouts of the scale and bias (shapes `params`) when the normalized `axes` of
/// `shape` are its trailing axes and each parameter is per row or per element; `None`
/// otherwise.
pub(super) fn layouts(
    shape: &[usize],
    axes: &[usize],
    plan: &ReducePlan,
    params: &[&[usize]],
) -> Option<[Layout; 2]> {
    if !plan.is_one_run() {
        return None;
    }
    let layout = |k: usize| match params.get(k) {
        None => Some(Layout::Absent),
        Some(p) => layout(p, shape, axes),
    };
    Some([layout(0)?, layout(1)?])
}

fn layout(param: &[usize], shape: &[usize], axes: &[usize]) -> Option<Layout> {
    let strides = broadcast_strides(param, shape).ok()?;
    let live = |d: &usize| shape[*d] > 1;
    let normalized: Vec<usize> = axes.iter().copied().filter(live).collect();
    let kept: Vec<usize> = (0..shape.len())
        .filter(|d| !axes.contains(d))
        .filter(live)
        .collect();
    if normalized.iter().all(|&d| strides[d] == 0) {
        let mut offsets = vec![0usize];
        for &d in &kept {
            let step = strides[d] as usize;
            offsets = offsets
                .iter()
                .flat_map(|&b| (0..shape[d]).map(move |i| b + i * step))
                .collect();
        }
        return Some(Layout::PerRow(offsets));
    }
    let mut expect = 1isize;
    for &d in normalized.iter().rev() {
        if strides[d] != expect {
            return None;
        }
        expect *= shape[d] as isize;
    }
    kept.iter()
        .all(|&d| strides[d] == 0)
        .then_some(Layout::PerElement)
}

/// One row's scale or bias: per element, or one value.
#[derive(Clone, Copy)]
enum Param<'a, C> {
    Each(&'a [C]),
    One(C),
}

impl<'a, C: Real> Param<'a, C> {
    /// The parameter of row `row` over the row's elements `span`; `absent` when not given.
    #[inline(always)]
    fn of(
        values: Option<&'a [C]>,
        layout: &Layout,
        row: usize,
        span: &std::ops::Range<usize>,
        absent: C,
    ) -> Param<'a, C> {
        match (values, layout) {
            (Some(v), Layout::PerElement) => Param::Each(&v[span.clone()]),
            (Some(v), Layout::PerRow(offsets)) => Param::One(v[offsets[row]]),
            _ => Param::One(absent),
        }
    }
}

/// The statistics of one row or part: element count, mean and sum of squared deviations.
#[derive(Clone, Copy, Default)]
struct Moments<C> {
    n: f64,
    mean: C,
    m2: C,
}

impl<C: Real> Moments<C> {
    /// Two passes over `x`: the mean, then the squared deviations from it; with `rms`,
    /// one pass: the mean taken as 0.
    #[inline(always)]
    fn of(x: &[C], rms: bool) -> Moments<C> {
        let n = x.len() as f64;
        let mean = if rms {
            C::ZERO
        } else {
            fold_run(SumOf { mean: false }, C::ZERO, x) / C::from_f64(n.max(1.0))
        };
        let m2 = fold_run(Deviations { mean }, C::ZERO, x);
        Moments { n, mean, m2 }
    }

    /// The statistics of both sets together.
    fn merge(self, b: Moments<C>) -> Moments<C> {
        let n = self.n + b.n;
        if b.n == 0.0 {
            return self;
        }
        if self.n == 0.0 {
            return b;
        }
        let delta = b.mean - self.mean;
        let wb = C::from_f64(b.n / n);
        let cross = C::from_f64(self.n * b.n / n);
        Moments {
            n,
            mean: self.mean + delta * wb,
            m2: self.m2 + b.m2 + delta * delta * cross,
        }
    }

    /// `1 / √(var + eps)` with the population variance.
    #[inline(always)]
    fn inv_std(self, eps: C) -> C {
        C::ONE / (self.m2 / C::from_f64(self.n.max(1.0)) + eps).sqrt()
    }
}

/// `Σ (x − mean)²`.
#[derive(Clone, Copy)]
struct Deviations<C> {
    mean: C,
}

impl<C: Real> Fold<C> for Deviations<C> {
    #[inline(always)]
    fn init(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        let d = v - self.mean;
        acc + d * d
    }
    #[inline(always)]
    fn merge(self, a: C, b: C) -> C {
        a + b
    }
    #[inline(always)]
    fn finish(self, acc: C, _: usize) -> C {
        acc
    }
}

/// What every task reads: the input, the plan, the scale and bias with their layouts.
struct Source<'a, C> {
    x: &'a [C],
    count: usize,
    params: [Option<&'a [C]>; 2],
    layouts: &'a [Layout; 2],
    eps: C,
    rms: bool,
}

/// Normalizes every row of `plan` (one run per row) of `x` into `out`; with `rms` by the
/// root mean square alone.
pub(super) fn normalize<C: Real>(
    plan: &ReducePlan,
    x: &[C],
    params: [Option<&[C]>; 2],
    layouts: &[Layout; 2],
    eps: f64,
    rms: bool,
    out: &mut [C],
) {
    let count = plan.count();
    let src = Source {
        x,
        count,
        params,
        layouts,
        eps: C::from_f64(eps),
        rms,
    };
    if count == 0 || out.is_empty() {
        return;
    }
    let parts = split_parts(plan.rows(), count);
    if parts == 1 {
        for_each_rows(out, count, 3 * count, |first, dst| {
            whole_rows(&src, first, dst)
        });
        return;
    }
    let span = |p: usize| p * count / parts..(p + 1) * count / parts;
    let mut pieces: Vec<(usize, std::ops::Range<usize>, &mut [C])> = Vec::new();
    for (row, dst) in out.chunks_exact_mut(count).enumerate() {
        let mut rest = dst;
        for p in 0..parts {
            let (head, tail) = rest.split_at_mut(span(p).len());
            pieces.push((row, span(p), head));
            rest = tail;
        }
    }
    let moments: Vec<Moments<C>> = pieces
        .par_iter()
        .map(|(row, span, _)| part_moments(x, row * count, span.clone(), rms))
        .collect();
    let stats: Vec<(C, C)> = moments
        .chunks_exact(parts)
        .map(|m| {
            let all = m.iter().fold(Moments::default(), |a, &b| a.merge(b));
            (all.mean, all.inv_std(src.eps))
        })
        .collect();
    pieces.par_iter_mut().for_each(|(row, span, dst)| {
        let (mean, inv) = stats[*row];
        part_apply(&src, *row, span.clone(), mean, inv, dst)
    });
}

multiversion! {
    /// Normalizes whole rows `first..`, `dst` holding them back to back.
    fn whole_rows<C: Real>(src: &Source<'_, C>, first: usize, dst: &mut [C]) {
        let n = src.count;
        for (j, out) in dst.chunks_exact_mut(n).enumerate() {
            let row = first + j;
            let x = &src.x[row * n..(row + 1) * n];
            let m = Moments::of(x, src.rms);
            write_row(src, row, 0..n, x, m.mean, m.inv_std(src.eps), out);
        }
    }
}

multiversion! {
    /// The moments of elements `span` of the row at `base`.
    fn part_moments<C: Real>(
        x: &[C],
        base: usize,
        span: std::ops::Range<usize>,
        rms: bool,
    ) -> Moments<C> {
        Moments::of(&x[base + span.start..base + span.end], rms)
    }
}

multiversion! {
    /// Writes elements `span` of row `row` with the row's mean and `1 / σ`.
    fn part_apply<C: Real>(
        src: &Source<'_, C>,
        row: usize,
        span: std::ops::Range<usize>,
        mean: C,
        inv: C,
        dst: &mut [C],
    ) {
        let base = row * src.count;
        let x = &src.x[base + span.start..base + span.end];
        write_row(src, row, span, x, mean, inv, dst);
    }
}

/// `dst = (x − mean) · inv · scale + bias` over elements `span` of row `row`.
#[inline(always)]
fn write_row<C: Real>(
    src: &Source<'_, C>,
    row: usize,
    span: std::ops::Range<usize>,
    x: &[C],
    mean: C,
    inv: C,
    dst: &mut [C],
) {
    let scale = Param::of(src.params[0], &src.layouts[0], row, &span, C::ONE);
    let bias = Param::of(src.params[1], &src.layouts[1], row, &span, C::ZERO);
    match (scale, bias) {
        (Param::Each(s), Param::Each(b)) => {
            for (((d, &v), &s), &b) in dst.iter_mut().zip(x).zip(s).zip(b) {
                *d = (v - mean) * inv * s + b;
            }
        }
        (Param::Each(s), Param::One(b)) => {
            for ((d, &v), &s) in dst.iter_mut().zip(x).zip(s) {
                *d = (v - mean) * inv * s + b;
            }
        }
        (Param::One(s), Param::Each(b)) => {
            let a = inv * s;
            for ((d, &v), &b) in dst.iter_mut().zip(x).zip(b) {
                *d = (v - mean) * a + b;
            }
        }
        (Param::One(s), Param::One(b)) => {
            let a = inv * s;
            for (d, &v) in dst.iter_mut().zip(x) {
                *d = (v - mean) * a + b;
            }
        }
    }
}
