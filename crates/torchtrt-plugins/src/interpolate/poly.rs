//! Periodic stretches of a tap table, and vectorisable kernels for them.
//!
//! With an integer up- or downsampling factor the taps of an axis repeat: in the interior
//! (away from clamped borders) output `start + p·m + ph` reads the consecutive inputs
//! `first + a·m + off[ph] + k` with the weights of phase `ph`. Kernels specialised on
//! `(p, a, taps)` then read a fixed window of `a + taps` inputs per period (each phase's
//! weights spread over the window, zero elsewhere), so every index is a constant offset and
//! the compiler vectorises across periods instead of gathering element by element.

use std::ops::Range;

use crate::kernels::simd::Madd;

/// The `(p, a)` pairs with specialised kernels: ×2…×4 up and ÷2…÷4 down.
const SHAPES: [(usize, usize); 6] = [(2, 1), (3, 1), (4, 1), (1, 2), (1, 3), (1, 4)];

/// How far apart the weights of two periods may be to count as equal.
const WEIGHT_TOLERANCE: f32 = 1e-6;

/// A periodic stretch of a table with `n` consecutive taps per output.
#[derive(Clone, Debug, PartialEq)]
pub struct Periodic {
    /// Outputs per period.
    pub p: usize,
    /// Inputs advanced per period.
    pub a: usize,
    /// Taps per output.
    pub n: usize,
    /// Outputs `start..start + p·periods` form the stretch.
    pub start: usize,
    /// Whole periods in the stretch.
    pub periods: usize,
    /// Input index of the first tap of output `start`.
    pub first: usize,
    /// Per phase, the first tap's offset from `first + a·m`.
    pub off: Vec<usize>,
    /// Per phase, its `n` weights.
    pub weight: Vec<f32>,
}

impl Periodic {
    /// Finds the longest periodic stretch around the middle of a table of `n` taps per
    /// output (`weight` empty for index-only tables), if one covers at least half of it.
    pub fn detect(index: &[usize], weight: &[f32], n: usize) -> Option<Periodic> {
        let outputs = index.len().checked_div(n)?;
        let mid = outputs / 2;
        SHAPES
            .iter()
            .filter_map(|&(p, a)| Periodic::around(index, weight, n, outputs, mid, p, a))
            .find(|s| 2 * s.p * s.periods >= outputs)
    }

    fn around(
        index: &[usize],
        weight: &[f32],
        n: usize,
        outputs: usize,
        mid: usize,
        p: usize,
        a: usize,
    ) -> Option<Periodic> {
        if mid + p > outputs {
            return None;
        }
        let tap0 = |o: usize| index[o * n];
        let matches = |o: usize| {
            let d = o as i64 - mid as i64;
            let (q, ph) = (d.div_euclid(p as i64), d.rem_euclid(p as i64) as usize);
            let Some(base) = (tap0(mid + ph) as i64).checked_add(q * a as i64) else {
                return false;
            };
            (0..n).all(|k| {
                let same_index = index[o * n + k] as i64 == base + k as i64;
                let same_weight = weight.is_empty()
                    || (weight[o * n + k] - weight[(mid + ph) * n + k]).abs() <= WEIGHT_TOLERANCE;
                same_index && same_weight
            })
        };
        let mut lo = mid;
        while lo > 0 && matches(lo - 1) {
            lo -= 1;
        }
        let mut hi = mid;
        while hi < outputs && matches(hi) {
            hi += 1;
        }
        let mut start = mid - p * ((mid - lo) / p);
        if let Some(r) = (0..p).find(|&r| start + r == 0 || tap0(start + r) != tap0(start + r - 1))
        {
            start += r;
        }
        let periods = (hi.max(start) - start) / p;
        if periods == 0 {
            return None;
        }
        let first = tap0(start);
        let off = (0..p)
            .map(|ph| tap0(start + ph).checked_sub(first).filter(|&o| o <= a))
            .collect::<Option<Vec<usize>>>()?;
        let weight = if weight.is_empty() {
            Vec::new()
        } else {
            weight[start * n..(start + p) * n].to_vec()
        };
        Some(Periodic {
            p,
            a,
            n,
            start,
            periods,
            first,
            off,
            weight,
        })
    }

    /// The outputs of the stretch.
    pub fn outputs(&self) -> Range<usize> {
        self.start..self.start + self.p * self.periods
    }

    /// Splits `outputs` into a head, the whole periods inside the stretch, and a tail.
    pub fn split(&self, outputs: Range<usize>) -> (Range<usize>, Range<usize>, Range<usize>) {
        let stretch = self.outputs();
        let first = outputs.start.max(stretch.start);
        let s0 = stretch.start + (first - stretch.start).div_ceil(self.p) * self.p;
        let last = outputs.end.min(stretch.end);
        if last <= s0 {
            return (
                outputs.clone(),
                outputs.end..outputs.end,
                outputs.end..outputs.end,
            );
        }
        let s1 = s0 + (last - s0) / self.p * self.p;
        (outputs.start..s0, s0..s1, s1..outputs.end)
    }

    /// The input index of the first tap of the period starting at output `o`.
    pub fn input_of(&self, o: usize) -> usize {
        self.first + self.a * ((o - self.start) / self.p)
    }
}

/// Weighted sums over a prefix of the outputs `mid` (whole periods of the stretch) of every
/// row: rows of `src` hold `in_len` inputs from input index `lo`, rows of `dst` hold the
/// outputs `outputs`. Returns how many outputs of `mid` it wrote (whole periods whose
/// window lies inside the row; 0 when no specialised kernel fits). Inlined into its
/// (multiversioned) caller.
#[inline(always)]
pub fn sum_rows<M: Madd>(
    s: &Periodic,
    src: &[f32],
    in_len: usize,
    lo: usize,
    outputs: Range<usize>,
    mid: Range<usize>,
    dst: &mut [f32],
) -> usize {
    macro_rules! go {
        ($($p:literal, $a:literal, $n:literal, $w:literal);*) => {
            match (s.p, s.a, s.n) {
                $(($p, $a, $n) => sum_rows_k::<M, $p, $a, $n, $w>(
                    s, src, in_len, lo, outputs, mid, dst,
                ),)*
                _ => 0,
            }
        };
    }
    go!(2, 1, 2, 3; 3, 1, 2, 3; 4, 1, 2, 3; 1, 2, 2, 4; 1, 3, 2, 5; 1, 4, 2, 6;
        2, 1, 4, 5; 3, 1, 4, 5; 4, 1, 4, 5; 1, 2, 4, 6; 1, 3, 4, 7; 1, 4, 4, 8;
        1, 3, 3, 6)
}

/// [`sum_rows`] for `P` phases advancing `A` inputs with `N` taps, over windows of
/// `W = A + N` inputs.
#[inline(always)]
fn sum_rows_k<M: Madd, const P: usize, const A: usize, const N: usize, const W: usize>(
    s: &Periodic,
    src: &[f32],
    in_len: usize,
    lo: usize,
    outputs: Range<usize>,
    mid: Range<usize>,
    dst: &mut [f32],
) -> usize {
    let mut w = [[0.0f32; W]; P];
    for (ph, wp) in w.iter_mut().enumerate() {
        let off = s.off[ph];
        wp[off..off + N].copy_from_slice(&s.weight[ph * N..(ph + 1) * N]);
    }
    let from = s.input_of(mid.start) - lo;
    let Some(room) = in_len.checked_sub(from + W) else {
        return 0;
    };
    let periods = (mid.len() / P).min(room / A + 1);
    let at = mid.start - outputs.start..mid.start - outputs.start + P * periods;
    for (row, out) in src
        .chunks_exact(in_len.max(1))
        .zip(dst.chunks_exact_mut(outputs.len().max(1)))
    {
        periods_k::<M, P, A, W>(&w, &row[from..], &mut out[at.clone()]);
    }
    P * periods
}

/// One row of whole periods: output `P·m + ph` is the window at input `A·m` dotted with the
/// weights of phase `ph`.
#[inline(always)]
fn periods_k<M: Madd, const P: usize, const A: usize, const W: usize>(
    w: &[[f32; W]; P],
    src: &[f32],
    dst: &mut [f32],
) {
    let periods = dst.len() / P;
    if periods == 0 || src.len() < A * (periods - 1) + W {
        return;
    }
    for m in 0..periods {
        for ph in 0..P {
            let mut acc = w[ph][0] * src[A * m];
            for j in 1..W {
                acc = M::madd(w[ph][j], src[A * m + j], acc);
            }
            dst[P * m + ph] = acc;
        }
    }
}

/// The NaN-propagating maximum over a prefix of the outputs `mid` of every row, for
/// stretches of one phase (`p = 1`: windows of `n` inputs every `a`), as [`sum_rows`] does
/// sums. Returns how many outputs of `mid` it wrote.
#[inline(always)]
pub fn max_rows(
    s: &Periodic,
    src: &[f32],
    in_len: usize,
    lo: usize,
    outputs: Range<usize>,
    mid: Range<usize>,
    dst: &mut [f32],
) -> usize {
    macro_rules! go {
        ($($a:literal, $n:literal);*) => {
            match (s.p, s.a, s.n) {
                $((1, $a, $n) => max_rows_k::<$a, $n>(s, src, in_len, lo, outputs, mid, dst),)*
                _ => 0,
            }
        };
    }
    go!(2, 2; 3, 3; 4, 4; 2, 3; 3, 4)
}

/// [`max_rows`] for windows of `N` inputs every `A`.
#[inline(always)]
fn max_rows_k<const A: usize, const N: usize>(
    s: &Periodic,
    src: &[f32],
    in_len: usize,
    lo: usize,
    outputs: Range<usize>,
    mid: Range<usize>,
    dst: &mut [f32],
) -> usize {
    let from = s.input_of(mid.start) - lo;
    let Some(room) = in_len.checked_sub(from + N) else {
        return 0;
    };
    let count = mid.len().min(room / A + 1);
    let at = mid.start - outputs.start..mid.start - outputs.start + count;
    for (row, out) in src
        .chunks_exact(in_len.max(1))
        .zip(dst.chunks_exact_mut(outputs.len().max(1)))
    {
        let (row, out) = (&row[from..], &mut out[at.clone()]);
        if row.len() < A * count.saturating_sub(1) + N {
            continue;
        }
        for (m, o) in out.iter_mut().enumerate() {
            let mut acc = row[A * m];
            for k in 1..N {
                let x = row[A * m + k];
                acc = if x > acc || x.is_nan() { x } else { acc };
            }
            *o = acc;
        }
    }
    count
}

/// The `(p, a)` of a stretch whose every phase reads the first input of its period, which
/// the nearest kernels specialise on: `(p, 1)` repeats each input `p` times, `(1, a)` takes
/// every `a`-th.
pub fn repeat_shape(s: &Periodic) -> Option<(usize, usize)> {
    (s.n == 1 && s.off.iter().all(|&o| o == 0)).then_some((s.p, s.a))
}

/// Nearest sampling over whole periods of a [`repeat_shape`] stretch: output `P·m + ph` is
/// input `A·m`. Writes nothing when `src` is too short.
#[inline(always)]
pub fn repeat<T: Copy, const P: usize, const A: usize>(src: &[T], dst: &mut [T]) -> bool {
    let periods = dst.len() / P;
    if periods == 0 || src.len() < A * (periods - 1) + 1 {
        return periods == 0;
    }
    let dst = &mut dst[..P * periods];
    if A == 1 {
        for (d, &s) in dst.chunks_exact_mut(P).zip(&src[..periods]) {
            d.fill(s);
        }
    } else {
        for (d, &s) in dst.chunks_exact_mut(P).zip(src.iter().step_by(A)) {
            d.fill(s);
        }
    }
    true
}
