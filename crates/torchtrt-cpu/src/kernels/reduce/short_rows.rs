//! f32 rows of at most [`MAX_LEN`] consecutive values (a 64-wide last axis) on AVX-512:
//! each row is loaded once into registers, sixteen lanes a vector and the last one masked,
//! reduced across its vectors and then across lanes by one horizontal step. The lane-array
//! folds of [`super::fold`] merge their lanes through memory once per row, which for rows
//! this short costs as much as reading them.

/// Longest row these kernels take: sixteen vectors.
pub(crate) const MAX_LEN: usize = 16 * LANES;

/// Lanes of one vector.
const LANES: usize = 16;

/// Rows a softmax takes through each of its passes before the next pass: the passes of
/// different rows overlap where one row's chain (maximum, exponentials, sum, scale) would
/// leave the vector units waiting on each step.
const GROUP: usize = 8;

/// The reductions of one row these kernels compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowFold {
    /// `Σ x`.
    Sum,
    /// `Σ x / n`.
    Mean,
    /// `max x`, NaN if any value is NaN.
    Max,
    /// `min x`, NaN if any value is NaN.
    Min,
}

/// Whether rows of `len` values run here: this CPU runs AVX-512 (at the level
/// `TORCHTRT_CPU_SIMD` allows) and `1 ≤ len ≤` [`MAX_LEN`].
pub(crate) fn takes(len: usize) -> bool {
    (1..=MAX_LEN).contains(&len) && crate::simd::v4()
}

/// Calls `$f::<NV>(args)` with `NV` = the vectors of one row of `$len` (`1..=16`).
macro_rules! by_vectors {
    ($len:expr, $f:ident, $($arg:expr),*) => {
        match $len.div_ceil(LANES) {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            8 => $f::<8>($($arg),*),
            9 => $f::<9>($($arg),*),
            10 => $f::<10>($($arg),*),
            11 => $f::<11>($($arg),*),
            12 => $f::<12>($($arg),*),
            13 => $f::<13>($($arg),*),
            14 => $f::<14>($($arg),*),
            15 => $f::<15>($($arg),*),
            _ => $f::<16>($($arg),*),
        }
    };
}

/// `out[j]` = the fold of row `j` of `x` (rows of `len` values back to back); `false`
/// (nothing written) when [`takes`] refuses `len` or `x` is shorter than `out.len()` rows.
pub(crate) fn reduce(fold: RowFold, x: &[f32], len: usize, out: &mut [f32]) -> bool {
    if !takes(len) || out.len().checked_mul(len).is_none_or(|n| x.len() < n) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: AVX-512 is available (`takes`) and `x` holds `out.len()` rows of `len`.
        unsafe { by_vectors!(len, reduce_rows, fold, x, len, out) };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Softmax (or log-softmax) of each row of `len` values of `x` into the same place in `out`
/// (whole rows, `x.len() == out.len()`); `false` (nothing written) when [`takes`] refuses
/// `len` or the lengths do not match.
pub(crate) fn softmax(x: &[f32], len: usize, log: bool, out: &mut [f32]) -> bool {
    if !takes(len) || x.len() != out.len() || !out.len().is_multiple_of(len) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: AVX-512 is available (`takes`) and `x`, `out` hold the same whole rows.
        unsafe { by_vectors!(len, softmax_rows, x, len, log, out) };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `x[k] = e^(x[k] − shift)` in place, returning their sum; `None` (nothing written) when
/// [`takes`] refuses `x.len()`.
pub(crate) fn exp_shifted(x: &mut [f32], shift: f32) -> Option<f32> {
    if !takes(x.len()) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let len = x.len();
        // SAFETY: AVX-512 is available (`takes`) and `x` is one row of `len` values.
        Some(unsafe { by_vectors!(len, exp_shifted_row, x, shift) })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = shift;
        None
    }
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use crate::math::avx512::exp;

/// The mask of the valid lanes of a row's last vector.
#[cfg(target_arch = "x86_64")]
fn last_mask(len: usize) -> u16 {
    u16::MAX >> (len.div_ceil(LANES) * LANES - len)
}

/// Row `p`'s `NV` vectors, the lanes past `len` set to `fill`.
///
/// # Safety
/// AVX-512F; `p` points at `len` readable values, `len` in `(NV − 1)·16 + 1 ..= NV·16`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load_row<const NV: usize>(p: *const f32, mask: u16, fill: __m512) -> [__m512; NV] {
    // SAFETY: every full vector lies inside the row; the last reads only its masked lanes.
    std::array::from_fn(|v| unsafe {
        if v + 1 < NV {
            _mm512_loadu_ps(p.add(v * LANES))
        } else {
            _mm512_mask_loadu_ps(fill, mask, p.add(v * LANES))
        }
    })
}

/// Stores `NV` vectors as one row of `len` values at `p`.
///
/// # Safety
/// AVX-512F; `p` points at `len` writable values, `len` as in [`load_row`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_row<const NV: usize>(p: *mut f32, mask: u16, row: [__m512; NV]) {
    for (v, x) in row.into_iter().enumerate() {
        // SAFETY: as `load_row`.
        unsafe {
            if v + 1 < NV {
                _mm512_storeu_ps(p.add(v * LANES), x);
            } else {
                _mm512_mask_storeu_ps(p.add(v * LANES), mask, x);
            }
        }
    }
}

/// The vectors combined lane by lane by `op`, pairwise.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tree<const NV: usize>(row: [__m512; NV], op: impl Fn(__m512, __m512) -> __m512) -> __m512 {
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
/// AVX-512F; `x` holds `out.len()` rows of `len` values, `len` as in [`load_row`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn reduce_rows<const NV: usize>(fold: RowFold, x: &[f32], len: usize, out: &mut [f32]) {
    let mask = last_mask(len);
    let fill = _mm512_set1_ps(match fold {
        RowFold::Sum | RowFold::Mean => 0.0,
        RowFold::Max => f32::NEG_INFINITY,
        RowFold::Min => f32::INFINITY,
    });
    let scale = 1.0 / len as f32;
    for (j, d) in out.iter_mut().enumerate() {
        // SAFETY: row `j` lies inside `x` (the caller's contract).
        let row = unsafe { load_row::<NV>(x.as_ptr().add(j * len), mask, fill) };
        *d = match fold {
            RowFold::Sum => _mm512_reduce_add_ps(tree(row, |a, b| _mm512_add_ps(a, b))),
            RowFold::Mean => _mm512_reduce_add_ps(tree(row, |a, b| _mm512_add_ps(a, b))) * scale,
            RowFold::Max | RowFold::Min => {
                let nan = row
                    .iter()
                    .fold(0, |m, &v| m | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v));
                let r = if fold == RowFold::Max {
                    _mm512_reduce_max_ps(tree(row, |a, b| _mm512_max_ps(a, b)))
                } else {
                    _mm512_reduce_min_ps(tree(row, |a, b| _mm512_min_ps(a, b)))
                };
                if nan != 0 { f32::NAN } else { r }
            }
        };
    }
}

/// # Safety
/// AVX-512F; `x` and `out` hold the same whole rows of `len` values, `len` as in
/// [`load_row`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_rows<const NV: usize>(x: &[f32], len: usize, log: bool, out: &mut [f32]) {
    let mask = last_mask(len);
    let neg_inf = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut maxima = [0f32; GROUP];
    let mut sums = [0f32; GROUP];
    for (g, d) in out.chunks_mut(GROUP * len).enumerate() {
        let src = x[g * GROUP * len..].as_ptr();
        let rows = d.len() / len;
        // SAFETY (the three passes): rows `0..rows` of the group lie inside `x` and `d`
        // (the caller's contract); each pass's rows are independent of one another.
        for (r, m) in maxima[..rows].iter_mut().enumerate() {
            let row = unsafe { load_row::<NV>(src.add(r * len), mask, neg_inf) };
            *m = _mm512_reduce_max_ps(tree(row, |a, b| _mm512_max_ps(a, b)));
        }
        for (r, (s, &m)) in sums[..rows].iter_mut().zip(&maxima).enumerate() {
            let row = unsafe { load_row::<NV>(src.add(r * len), mask, neg_inf) };
            let e = row.map(|v| exp(_mm512_sub_ps(v, _mm512_set1_ps(m))));
            *s = _mm512_reduce_add_ps(tree(e, |a, b| _mm512_add_ps(a, b)));
            if !log {
                unsafe { store_row(d.as_mut_ptr().add(r * len), mask, e) };
            }
        }
        for (r, (&s, &m)) in sums[..rows].iter().zip(&maxima).enumerate() {
            let y = if log {
                let shift = _mm512_set1_ps(m + s.ln());
                let row = unsafe { load_row::<NV>(src.add(r * len), mask, neg_inf) };
                row.map(|v| _mm512_sub_ps(v, shift))
            } else {
                let inv = _mm512_set1_ps(1.0 / s);
                let e = unsafe { load_row::<NV>(d.as_ptr().add(r * len), mask, neg_inf) };
                e.map(|v| _mm512_mul_ps(v, inv))
            };
            unsafe { store_row(d.as_mut_ptr().add(r * len), mask, y) };
        }
    }
}

/// # Safety
/// AVX-512F; `x.len()` as in [`load_row`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exp_shifted_row<const NV: usize>(x: &mut [f32], shift: f32) -> f32 {
    let mask = last_mask(x.len());
    // SAFETY: `x` is one row of the length `NV` was chosen for.
    let row = unsafe { load_row::<NV>(x.as_ptr(), mask, _mm512_set1_ps(f32::NEG_INFINITY)) };
    let e = row.map(|v| exp(_mm512_sub_ps(v, _mm512_set1_ps(shift))));
    // SAFETY: as above.
    unsafe { store_row(x.as_mut_ptr(), mask, e) };
    _mm512_reduce_add_ps(tree(e, |a, b| _mm512_add_ps(a, b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::exp_f32_with;
    use crate::simd::Fused;

    /// Values in [-4, 4).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        torchtrt_testing::values(n, seed)
            .into_iter()
            .map(|v| v * 4.0)
            .collect()
    }

    /// The vector exponential equals the scalar one bit for bit, over the whole range,
    /// its clamps and NaN.
    #[test]
    fn exp_matches_the_scalar_steps() {
        if !takes(1) {
            println!("skipped: no AVX-512");
            return;
        }
        let mut xs: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.05).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -87.3,
            -87.4,
            88.7,
            88.8,
        ]);
        xs.resize(xs.len().next_multiple_of(LANES), 0.5);
        for chunk in xs.chunks_exact(LANES) {
            let mut got = [0f32; LANES];
            // SAFETY: AVX-512F is available (`takes`); the chunk and `got` hold 16 values.
            unsafe { _mm512_storeu_ps(got.as_mut_ptr(), exp(_mm512_loadu_ps(chunk.as_ptr()))) };
            for (&x, &g) in chunk.iter().zip(&got) {
                let want = exp_f32_with::<Fused>(x);
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "exp({x}): {g} vs {want}"
                );
            }
        }
    }

    /// Every row length 1..=256 (full and masked last vectors) against plain sums and
    /// maxima in f64, NaN propagated by max and min, softmax rows summing to one.
    #[test]
    fn every_row_length_matches_plain_folds() {
        if !takes(1) {
            println!("skipped: no AVX-512");
            return;
        }
        for len in 1..=MAX_LEN {
            let rows = 3;
            let mut x = values(rows * len + 1, len as u64);
            x.truncate(rows * len);
            if len > 2 {
                x[len + len / 2] = f32::NAN;
            }
            for fold in [RowFold::Sum, RowFold::Mean, RowFold::Max, RowFold::Min] {
                let mut out = vec![1.0e30; rows];
                assert!(reduce(fold, &x, len, &mut out));
                for (j, &got) in out.iter().enumerate() {
                    let row = &x[j * len..(j + 1) * len];
                    let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
                    let want = match fold {
                        RowFold::Sum => sum,
                        RowFold::Mean => sum / len as f64,
                        RowFold::Max if row.iter().any(|v| v.is_nan()) => f64::NAN,
                        RowFold::Min if row.iter().any(|v| v.is_nan()) => f64::NAN,
                        RowFold::Max => row.iter().fold(f64::MIN, |m, &v| m.max(v.into())),
                        RowFold::Min => row.iter().fold(f64::MAX, |m, &v| m.min(v.into())),
                    };
                    let ok = (want.is_nan() && got.is_nan())
                        || (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs() * 4.0);
                    assert!(ok, "{fold:?} len {len} row {j}: {got} vs {want}");
                }
            }
            for log in [false, true] {
                let mut out = vec![f32::NAN; rows * len];
                assert!(softmax(&x, len, log, &mut out));
                for (j, d) in out.chunks_exact(len).enumerate() {
                    let row = &x[j * len..(j + 1) * len];
                    if row.iter().any(|v| v.is_nan()) {
                        assert!(d.iter().all(|v| v.is_nan()), "len {len} row {j}: NaN row");
                        continue;
                    }
                    let m = row.iter().fold(f64::MIN, |m, &v| m.max(v.into()));
                    let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
                    for (&v, &g) in row.iter().zip(d) {
                        let p = (f64::from(v) - m).exp() / s;
                        let want = if log { p.ln() } else { p };
                        assert!(
                            (f64::from(g) - want).abs() <= 2e-6 * (1.0 + want.abs()),
                            "log {log} len {len} row {j}: {g} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn refuses_what_it_cannot_take() {
        let mut out = [0.0; 2];
        assert!(!reduce(RowFold::Sum, &[1.0; 3], 2, &mut out), "x too short");
        assert!(
            !reduce(RowFold::Sum, &[1.0; 600], 300, &mut out),
            "rows too long"
        );
        assert!(!reduce(RowFold::Sum, &[], 0, &mut out), "empty rows");
        assert!(
            !softmax(&[1.0; 3], 2, false, &mut [0.0; 4]),
            "lengths differ"
        );
        assert!(
            !softmax(&[1.0; 3], 2, false, &mut [0.0; 3]),
            "not whole rows"
        );
    }
}
