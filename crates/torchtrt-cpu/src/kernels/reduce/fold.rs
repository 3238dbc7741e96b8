//! Reductions as folds the compiler vectorises: a step applied element by element into
//! independent lanes, a merge of two partial results, and a finish.

use std::marker::PhantomData;

use crate::scalar::Real;
use crate::simd::Madd;

/// A reduction of floats. Every method is `#[inline(always)]` so that the loops around
/// them compile for the caller's instruction set.
pub(crate) trait Fold<C: Real>: Copy + Send + Sync {
    /// Whether a step costs far more than a merge (an exponential): runs then take the
    /// wide lanes from one full set of them, whatever merging them costs.
    const COSTLY: bool = false;
    /// Whether the latency of a step (a compare and a select) bounds a short run folded
    /// alone: rows of one short run are then folded four at a time ([`fold_runs4`]). Sums
    /// gained nothing from it (a little slower, median of 500 runs, rows of 64).
    const INTERLEAVE_ROWS: bool = false;
    /// The result of reducing nothing.
    fn init(self) -> C;
    /// Folds one value into an accumulator.
    fn step(self, acc: C, v: C) -> C;
    /// Combines two accumulators.
    fn merge(self, a: C, b: C) -> C;
    /// The result from the accumulator of `count` values.
    fn finish(self, acc: C, count: usize) -> C;
}

/// Lanes a run is folded into: four AVX2 or two AVX-512 vectors of f32, enough independent
/// chains to hide the latency of an add.
const LANES: usize = 32;

/// `acc` with every value of `x` folded in, through [`LANES`] independent lanes for runs of
/// at least four times that (eight lanes otherwise, and for what is left), the lanes merged
/// pairwise. Short runs (a 64-wide last axis) skip the wide lanes: merging 32 lanes costs
/// more than the longer chains of eight (reduce-mean over rows of 64, one thread here:
/// 0.47–0.56 → 0.33–0.35 ms). [`Fold::COSTLY`] folds take them from [`LANES`] values on.
#[inline(always)]
pub(crate) fn fold_run<C: Real, F: Fold<C>>(f: F, acc: C, x: &[C]) -> C {
    let mut acc = acc;
    let mut x = x;
    if x.len() >= if F::COSTLY { LANES } else { SHORT_RUN } {
        let chunks = x.chunks_exact(LANES);
        x = chunks.remainder();
        let mut lanes = [f.init(); LANES];
        for chunk in chunks {
            for (l, &v) in lanes.iter_mut().zip(chunk) {
                *l = f.step(*l, v);
            }
        }
        acc = f.merge(acc, merge32(f, lanes));
    }
    if x.len() >= 8 {
        let chunks = x.chunks_exact(8);
        x = chunks.remainder();
        let mut lanes = [f.init(); 8];
        for chunk in chunks {
            for (l, &v) in lanes.iter_mut().zip(chunk) {
                *l = f.step(*l, v);
            }
        }
        acc = f.merge(acc, merge8(f, lanes));
    }
    for &v in x {
        acc = f.step(acc, v);
    }
    acc
}

/// Runs shorter than this take no wide lanes in [`fold_run`]; rows of one such run are
/// folded four at a time ([`fold_runs4`]).
pub(crate) const SHORT_RUN: usize = 4 * LANES;

/// The folds of four equally long runs, eight lanes each, interleaved: four independent
/// chains where one row alone has one (max over rows of 64, two threads, this machine:
/// 0.43–0.48 → 0.21–0.23 ms). Meant for runs shorter than [`SHORT_RUN`].
#[inline(always)]
pub(crate) fn fold_runs4<C: Real, F: Fold<C>>(f: F, rows: [&[C]; 4]) -> [C; 4] {
    let n = rows[0].len();
    let rows = [&rows[0][..n], &rows[1][..n], &rows[2][..n], &rows[3][..n]];
    let whole = n - n % 8;
    let mut lanes = [[f.init(); 8]; 4];
    for c in 0..whole / 8 {
        for (l, r) in lanes.iter_mut().zip(rows) {
            for (l, &v) in l.iter_mut().zip(&r[8 * c..8 * c + 8]) {
                *l = f.step(*l, v);
            }
        }
    }
    let mut acc = [
        merge8(f, lanes[0]),
        merge8(f, lanes[1]),
        merge8(f, lanes[2]),
        merge8(f, lanes[3]),
    ];
    for (a, r) in acc.iter_mut().zip(rows) {
        for &v in &r[whole..n] {
            *a = f.step(*a, v);
        }
    }
    acc
}

/// Writes `dst[k] = map(x[k])` and returns `acc` with every written value folded in,
/// through [`LANES`] independent lanes.
#[inline(always)]
pub(crate) fn map_fold_run<C: Real, F: Fold<C>>(
    f: F,
    acc: C,
    x: &[C],
    dst: &mut [C],
    map: impl Fn(C) -> C,
) -> C {
    let mut acc = acc;
    let n = x.len().min(dst.len());
    let whole = n - n % LANES;
    if whole > 0 {
        let mut lanes = [f.init(); LANES];
        for (xs, ds) in x[..whole]
            .chunks_exact(LANES)
            .zip(dst[..whole].chunks_exact_mut(LANES))
        {
            for ((l, &v), d) in lanes.iter_mut().zip(xs).zip(ds) {
                let y = map(v);
                *d = y;
                *l = f.step(*l, y);
            }
        }
        acc = f.merge(acc, merge32(f, lanes));
    }
    for (&v, d) in x[whole..n].iter().zip(&mut dst[whole..n]) {
        let y = map(v);
        *d = y;
        acc = f.step(acc, y);
    }
    acc
}

/// [`map_fold_run`] in place: `x[k] = map(x[k])`, returning `acc` with every written value
/// folded in.
#[inline(always)]
pub(crate) fn map_fold_mut<C: Real, F: Fold<C>>(
    f: F,
    acc: C,
    x: &mut [C],
    map: impl Fn(C) -> C,
) -> C {
    let mut acc = acc;
    let whole = x.len() - x.len() % LANES;
    let (body, tail) = x.split_at_mut(whole);
    if whole > 0 {
        let mut lanes = [f.init(); LANES];
        for xs in body.chunks_exact_mut(LANES) {
            for (l, v) in lanes.iter_mut().zip(xs) {
                *v = map(*v);
                *l = f.step(*l, *v);
            }
        }
        acc = f.merge(acc, merge32(f, lanes));
    }
    for v in tail {
        *v = map(*v);
        acc = f.step(acc, *v);
    }
    acc
}

/// The merge of [`LANES`] lanes: quarters first, then halves. The lanes pass through
/// `black_box` so that the vectoriser keeps the loop that filled them in full-width
/// registers instead of shaping it after this tree.
#[inline(always)]
fn merge32<C: Real, F: Fold<C>>(f: F, lanes: [C; LANES]) -> C {
    let l = std::hint::black_box(lanes);
    let mut q = [f.init(); 8];
    for (j, q) in q.iter_mut().enumerate() {
        *q = f.merge(f.merge(l[j], l[j + 8]), f.merge(l[j + 16], l[j + 24]));
    }
    merge8(f, q)
}

/// The merge of eight lanes, pairwise.
#[inline(always)]
fn merge8<C: Real, F: Fold<C>>(f: F, lanes: [C; 8]) -> C {
    let l = std::hint::black_box(lanes);
    let h = [
        f.merge(l[0], l[4]),
        f.merge(l[1], l[5]),
        f.merge(l[2], l[6]),
        f.merge(l[3], l[7]),
    ];
    f.merge(f.merge(h[0], h[2]), f.merge(h[1], h[3]))
}

/// `dst[j] = step(dst[j], row[j])` for every row in order, four rows per pass over `dst`
/// (then two, then one): each pass loads and stores `dst` once.
#[inline(always)]
pub(crate) fn fold_rows<'a, C: Real, F: Fold<C>>(
    f: F,
    dst: &mut [C],
    mut rows: impl Iterator<Item = &'a [C]>,
) {
    let n = dst.len();
    loop {
        match [rows.next(), rows.next(), rows.next(), rows.next()] {
            [Some(a), Some(b), Some(c), Some(e)] => {
                let (a, b, c, e) = (&a[..n], &b[..n], &c[..n], &e[..n]);
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = f.step(f.step(f.step(f.step(*d, a[j]), b[j]), c[j]), e[j]);
                }
            }
            [Some(a), Some(b), c, _] => {
                for ((d, &u), &v) in dst.iter_mut().zip(&a[..n]).zip(&b[..n]) {
                    *d = f.step(f.step(*d, u), v);
                }
                if let Some(c) = c {
                    for (d, &u) in dst.iter_mut().zip(&c[..n]) {
                        *d = f.step(*d, u);
                    }
                }
                return;
            }
            [Some(a), ..] => {
                for (d, &u) in dst.iter_mut().zip(&a[..n]) {
                    *d = f.step(*d, u);
                }
                return;
            }
            _ => return,
        }
    }
}

/// `Σ x` (also the accumulator of `Mean`, which divides by the count).
#[derive(Clone, Copy)]
pub(crate) struct SumOf {
    /// Divide by the count at the end.
    pub(crate) mean: bool,
}

/// `max x`, NaN if any value is NaN; −∞ for none.
#[derive(Clone, Copy)]
pub(crate) struct MaxOf;

/// `min x`, NaN if any value is NaN; +∞ for none.
#[derive(Clone, Copy)]
pub(crate) struct MinOf;

/// `Π x`.
#[derive(Clone, Copy)]
pub(crate) struct ProdOf;

/// `Σ |x|`.
#[derive(Clone, Copy)]
pub(crate) struct L1Of;

/// `Σ x²`, square-rooted at the end for `L2`.
#[derive(Clone, Copy)]
pub(crate) struct SquaresOf {
    /// Take the square root at the end.
    pub(crate) root: bool,
}

/// `Σ e^(x − shift)`: the second pass of a log-sum-exp, its exponentials computed with
/// the multiply-adds `M`.
pub(crate) struct ExpSumOf<C, M> {
    shift: C,
    madd: PhantomData<fn() -> M>,
}

impl<C, M> ExpSumOf<C, M> {
    /// The sum of `e^(x − shift)`.
    #[inline(always)]
    pub(crate) fn new(shift: C) -> ExpSumOf<C, M> {
        ExpSumOf {
            shift,
            madd: PhantomData,
        }
    }
}

impl<C: Copy, M> Clone for ExpSumOf<C, M> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: Copy, M> Copy for ExpSumOf<C, M> {}

impl<C: Real> Fold<C> for SumOf {
    #[inline(always)]
    fn init(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc + v
    }
    #[inline(always)]
    fn merge(self, a: C, b: C) -> C {
        a + b
    }
    #[inline(always)]
    fn finish(self, acc: C, count: usize) -> C {
        if self.mean {
            acc / C::from_f64(count as f64)
        } else {
            acc
        }
    }
}

impl<C: Real> Fold<C> for MaxOf {
    const INTERLEAVE_ROWS: bool = true;
    #[inline(always)]
    fn init(self) -> C {
        C::NEG_INFINITY
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        if v > acc || v.is_nan() { v } else { acc }
    }
    #[inline(always)]
    fn merge(self, a: C, b: C) -> C {
        let m = if b > a { b } else { a };
        m.nan_if(b.is_nan())
    }
    #[inline(always)]
    fn finish(self, acc: C, _: usize) -> C {
        acc
    }
}

impl<C: Real> Fold<C> for MinOf {
    const INTERLEAVE_ROWS: bool = true;
    #[inline(always)]
    fn init(self) -> C {
        C::INFINITY
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        if v < acc || v.is_nan() { v } else { acc }
    }
    #[inline(always)]
    fn merge(self, a: C, b: C) -> C {
        let m = if b < a { b } else { a };
        m.nan_if(b.is_nan())
    }
    #[inline(always)]
    fn finish(self, acc: C, _: usize) -> C {
        acc
    }
}

impl<C: Real> Fold<C> for ProdOf {
    #[inline(always)]
    fn init(self) -> C {
        C::ONE
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc * v
    }
    #[inline(always)]
    fn merge(self, a: C, b: C) -> C {
        a * b
    }
    #[inline(always)]
    fn finish(self, acc: C, _: usize) -> C {
        acc
    }
}

impl<C: Real> Fold<C> for L1Of {
    #[inline(always)]
    fn init(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc + v.abs()
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

impl<C: Real> Fold<C> for SquaresOf {
    #[inline(always)]
    fn init(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc + v * v
    }
    #[inline(always)]
    fn merge(self, a: C, b: C) -> C {
        a + b
    }
    #[inline(always)]
    fn finish(self, acc: C, _: usize) -> C {
        if self.root { acc.sqrt() } else { acc }
    }
}

impl<C: Real, M: Madd> Fold<C> for ExpSumOf<C, M> {
    const COSTLY: bool = true;
    #[inline(always)]
    fn init(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc + (v - self.shift).exp_with::<M>()
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

/// `m + ln s` for a maximum `m` and a sum of `e^(x − m)`; infinite or NaN maxima pass
/// through.
#[inline(always)]
pub(crate) fn log_sum_exp<C: Real>(m: C, s: C) -> C {
    if m == C::INFINITY || m == C::NEG_INFINITY || m.is_nan() {
        m
    } else {
        m + s.ln()
    }
}
