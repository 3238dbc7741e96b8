//! The short-row kernels, written once over [`Lanes`] and compiled for each instruction set
//! through its own `#[target_feature]` entry points.

use super::lanes::{Avx2, Avx512, Lanes};
use super::{GROUP, Isa, RowFold};

/// Calls `$f::<NV>(args)` with `NV` = `$nv` (`1..=16`).
macro_rules! by_vectors {
    ($nv:expr, $($f:ident)::+, $($arg:expr),*) => {
        match $nv {
            1 => $($f)::+::<1>($($arg),*),
            2 => $($f)::+::<2>($($arg),*),
            3 => $($f)::+::<3>($($arg),*),
            4 => $($f)::+::<4>($($arg),*),
            5 => $($f)::+::<5>($($arg),*),
            6 => $($f)::+::<6>($($arg),*),
            7 => $($f)::+::<7>($($arg),*),
            8 => $($f)::+::<8>($($arg),*),
            9 => $($f)::+::<9>($($arg),*),
            10 => $($f)::+::<10>($($arg),*),
            11 => $($f)::+::<11>($($arg),*),
            12 => $($f)::+::<12>($($arg),*),
            13 => $($f)::+::<13>($($arg),*),
            14 => $($f)::+::<14>($($arg),*),
            15 => $($f)::+::<15>($($arg),*),
            _ => $($f)::+::<16>($($arg),*),
        }
    };
}

/// The kernels of [`super::reduce`], [`super::softmax`] and [`super::exp_shifted`] compiled
/// for one instruction set: each takes rows of `NV` vectors (the last one partial or full).
macro_rules! entry_points {
    ($isa:ident, $lanes:ty, $features:literal) => {
        mod $isa {
            use super::*;

            /// # Safety
            /// As [`super::reduce_rows`], on a CPU with the instruction set.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn reduce_rows<const NV: usize>(
                fold: RowFold,
                x: &[f32],
                len: usize,
                out: &mut [f32],
            ) {
                unsafe { super::reduce_rows::<$lanes, NV>(fold, x, len, out) }
            }

            /// # Safety
            /// As [`super::softmax_rows`], on a CPU with the instruction set.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn softmax_rows<const NV: usize>(
                x: &[f32],
                len: usize,
                log: bool,
                out: &mut [f32],
            ) {
                unsafe { super::softmax_rows::<$lanes, NV>(x, len, log, out) }
            }

            /// # Safety
            /// As [`super::exp_shifted_row`], on a CPU with the instruction set.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn exp_shifted_row<const NV: usize>(
                x: &mut [f32],
                shift: f32,
            ) -> f32 {
                unsafe { super::exp_shifted_row::<$lanes, NV>(x, shift) }
            }
        }
    };
}

entry_points!(avx512, Avx512, "avx512f,avx2,fma");
entry_points!(avx2, Avx2, "avx2,fma");

/// `out[j]` = the fold of row `j` of `x`.
///
/// # Safety
/// The CPU has `isa`; `1 ≤ len ≤ isa.max_len()`; `x` holds `out.len()` rows of `len`.
pub(super) unsafe fn reduce(isa: Isa, fold: RowFold, x: &[f32], len: usize, out: &mut [f32]) {
    unsafe {
        match isa {
            Isa::Avx512 => by_vectors!(
                len.div_ceil(Avx512::N),
                avx512::reduce_rows,
                fold,
                x,
                len,
                out
            ),
            Isa::Avx2 => by_vectors!(len.div_ceil(Avx2::N), avx2::reduce_rows, fold, x, len, out),
        }
    }
}

/// Softmax (or log-softmax) of each row of `x` into `out`.
///
/// # Safety
/// The CPU has `isa`; `1 ≤ len ≤ isa.max_len()`; `x` and `out` hold the same whole rows.
pub(super) unsafe fn softmax(isa: Isa, x: &[f32], len: usize, log: bool, out: &mut [f32]) {
    unsafe {
        match isa {
            Isa::Avx512 => by_vectors!(
                len.div_ceil(Avx512::N),
                avx512::softmax_rows,
                x,
                len,
                log,
                out
            ),
            Isa::Avx2 => by_vectors!(len.div_ceil(Avx2::N), avx2::softmax_rows, x, len, log, out),
        }
    }
}

/// `x[k] = e^(x[k] − shift)` in place (`shift` at least every value), returning their sum.
///
/// # Safety
/// The CPU has `isa`; `1 ≤ x.len() ≤ isa.max_len()`.
pub(super) unsafe fn exp_shifted(isa: Isa, x: &mut [f32], shift: f32) -> f32 {
    let len = x.len();
    unsafe {
        match isa {
            Isa::Avx512 => by_vectors!(len.div_ceil(Avx512::N), avx512::exp_shifted_row, x, shift),
            Isa::Avx2 => by_vectors!(len.div_ceil(Avx2::N), avx2::exp_shifted_row, x, shift),
        }
    }
}

/// A row's last vector: whole (plain loads and stores), or the lanes of `mask` (masked
/// ones, which AVX2 on AMD stores slowly).
#[derive(Clone, Copy)]
struct Tail<L: Lanes> {
    mask: L::Mask,
    full: bool,
}

impl<L: Lanes> Tail<L> {
    /// The last vector of rows of `len ≥ 1` values.
    ///
    /// # Safety
    /// `L`'s instruction set.
    #[inline(always)]
    unsafe fn of(len: usize) -> Tail<L> {
        Tail {
            mask: unsafe { L::last_mask(len) },
            full: len.is_multiple_of(L::N),
        }
    }
}

/// Row `p`'s `NV` vectors, the lanes past its end set to `fill`.
///
/// # Safety
/// `L`'s instruction set; `p` points at a row of `(NV − 1)·N + 1 ..= NV·N` readable
/// values whose last vector is `tail`.
#[inline(always)]
unsafe fn load_row<L: Lanes, const NV: usize>(
    p: *const f32,
    tail: Tail<L>,
    fill: L::V,
) -> [L::V; NV] {
    // SAFETY: every full vector lies inside the row; a partial last one reads only its
    // masked lanes.
    std::array::from_fn(|v| unsafe {
        if v + 1 < NV || tail.full {
            L::load(p.add(v * L::N))
        } else {
            L::load_masked(p.add(v * L::N), tail.mask, fill)
        }
    })
}

/// Stores `NV` vectors as one row at `p`.
///
/// # Safety
/// As [`load_row`], the row writable.
#[inline(always)]
unsafe fn store_row<L: Lanes, const NV: usize>(p: *mut f32, tail: Tail<L>, row: [L::V; NV]) {
    for (v, x) in row.into_iter().enumerate() {
        // SAFETY: as `load_row`.
        unsafe {
            if v + 1 < NV || tail.full {
                L::store(p.add(v * L::N), x);
            } else {
                L::store_masked(p.add(v * L::N), tail.mask, x);
            }
        }
    }
}

/// The vectors combined lane by lane by `op`, pairwise.
#[inline(always)]
fn tree<V: Copy, const NV: usize>(row: [V; NV], op: impl Fn(V, V) -> V) -> V {
    let mut v = row;
    let mut n = NV;
    while n > 1 {
        let half = n.div_ceil(2);
        for i in 0..n / 2 {
            v[i] = op(v[i], v[i + half]);
        }
        n = half;
    }
    v[0]
}

/// # Safety
/// `L`'s instruction set; `x` holds `out.len()` rows of `len` values, `len` as in
/// [`load_row`].
#[inline(always)]
unsafe fn reduce_rows<L: Lanes, const NV: usize>(
    fold: RowFold,
    x: &[f32],
    len: usize,
    out: &mut [f32],
) {
    // SAFETY (throughout): `L`'s instruction set is available (the caller's contract).
    let (tail, fill) = unsafe {
        let fill = match fold {
            RowFold::Sum | RowFold::Mean => 0.0,
            RowFold::Max => f32::NEG_INFINITY,
            RowFold::Min => f32::INFINITY,
        };
        (Tail::<L>::of(len), L::splat(fill))
    };
    let scale = 1.0 / len as f32;
    for (j, d) in out.iter_mut().enumerate() {
        // SAFETY: row `j` lies inside `x` (the caller's contract).
        let row = unsafe { load_row::<L, NV>(x.as_ptr().add(j * len), tail, fill) };
        let sum = || unsafe { L::sum_lanes(tree(row, |a, b| L::add(a, b))) };
        *d = match fold {
            RowFold::Sum => sum(),
            RowFold::Mean => sum() * scale,
            _ if unsafe { L::any_nan(&row) } => f32::NAN,
            RowFold::Max => unsafe { L::max_lanes(tree(row, |a, b| L::max(a, b))) },
            RowFold::Min => unsafe { L::min_lanes(tree(row, |a, b| L::min(a, b))) },
        };
    }
}

/// Softmax (or log-softmax) of each row of `x` into `out`, [`GROUP`] rows through each pass
/// before the next.
///
/// # Safety
/// `L`'s instruction set; `x` and `out` hold the same whole rows of `len` values, `len` as
/// in [`load_row`].
#[inline(always)]
unsafe fn softmax_rows<L: Lanes, const NV: usize>(
    x: &[f32],
    len: usize,
    log: bool,
    out: &mut [f32],
) {
    // SAFETY (throughout): `L`'s instruction set is available, and rows `0..rows` of each
    // group lie inside `x` and `d` (the caller's contract); each pass's rows are
    // independent of one another.
    let (tail, neg_inf) = unsafe { (Tail::<L>::of(len), L::splat(f32::NEG_INFINITY)) };
    let mut maxima = [0f32; GROUP];
    let mut sums = [0f32; GROUP];
    for (g, d) in out.chunks_mut(GROUP * len).enumerate() {
        let src = x[g * GROUP * len..].as_ptr();
        let rows = d.len() / len;
        for (r, m) in maxima[..rows].iter_mut().enumerate() {
            let row = unsafe { load_row::<L, NV>(src.add(r * len), tail, neg_inf) };
            *m = unsafe { L::max_lanes(tree(row, |a, b| L::max(a, b))) };
        }
        for (r, (s, &m)) in sums[..rows].iter_mut().zip(&maxima).enumerate() {
            let row = unsafe { load_row::<L, NV>(src.add(r * len), tail, neg_inf) };
            let e = row.map(|v| unsafe { L::exp_nonpositive(L::sub(v, L::splat(m))) });
            *s = unsafe { L::sum_lanes(tree(e, |a, b| L::add(a, b))) };
            if !log {
                unsafe { store_row::<L, NV>(d.as_mut_ptr().add(r * len), tail, e) };
            }
        }
        for (r, (&s, &m)) in sums[..rows].iter().zip(&maxima).enumerate() {
            let y = unsafe {
                if log {
                    let shift = L::splat(m + s.ln());
                    let row = load_row::<L, NV>(src.add(r * len), tail, neg_inf);
                    row.map(|v| L::sub(v, shift))
                } else {
                    let inv = L::splat(1.0 / s);
                    let e = load_row::<L, NV>(d.as_ptr().add(r * len), tail, neg_inf);
                    e.map(|v| L::mul(v, inv))
                }
            };
            unsafe { store_row::<L, NV>(d.as_mut_ptr().add(r * len), tail, y) };
        }
    }
}

/// # Safety
/// `L`'s instruction set; `x.len()` as `len` in [`load_row`].
#[inline(always)]
unsafe fn exp_shifted_row<L: Lanes, const NV: usize>(x: &mut [f32], shift: f32) -> f32 {
    // SAFETY: `L`'s instruction set is available and `x` is one row of the length `NV` was
    // chosen for (the caller's contract).
    unsafe {
        let tail = Tail::<L>::of(x.len());
        let row = load_row::<L, NV>(x.as_ptr(), tail, L::splat(f32::NEG_INFINITY));
        let e = row.map(|v| L::exp_nonpositive(L::sub(v, L::splat(shift))));
        store_row::<L, NV>(x.as_mut_ptr(), tail, e);
        L::sum_lanes(tree(e, |a, b| L::add(a, b)))
    }
}
