//! The AVX-512 form of [`super::maxpool`] for narrow rows (at most 64 inputs and 16
//! outputs) whose column windows do not tile the row, e.g. 30×45 → 7×7. Everything stays
//! in registers: the input rows of a row window are reduced sixteen lanes at a time (masked
//! at the row's end) while an unordered compare notes any NaN (such a row is left to the
//! caller's NaN-aware kernel); `K` sparse-table levels turn the row into maxima of `2^K` adjacent
//! columns (each level the one below maxed with itself shifted by `2^(k−1)` lanes across
//! the next vector), and since every window is between `2^K` and `2^(K+1)` long, each output
//! is the maximum of two overlapping entries, gathered with two permutes per operand.

use std::arch::x86_64::{
    __m512, __m512i, __mmask16, _CMP_UNORD_Q, _mm512_alignr_epi32, _mm512_castps_si512,
    _mm512_castsi512_ps, _mm512_cmp_ps_mask, _mm512_loadu_si512, _mm512_mask_blend_ps,
    _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_max_ps, _mm512_permutex2var_ps,
    _mm512_setzero_ps,
};
use std::ops::Range;

use crate::kernels::simd::avx512;

/// Lanes of one vector.
const LANES: usize = 16;
/// Vectors of one row: rows are at most `VECTORS · LANES` wide.
const VECTORS: usize = 4;
/// Most sparse-table levels: a level shifts by at most half a vector.
const MAX_LEVELS: u32 = 4;

/// The column side of a narrow-row pool: levels and the two gather patterns.
pub struct NarrowRows {
    width: usize,
    outputs: usize,
    levels: u32,
    first: [i32; LANES],
    last: [i32; LANES],
}

impl NarrowRows {
    /// The plan for rows `width` wide pooled into `cols`, when the CPU and the sizes allow.
    pub fn new(width: usize, cols: &[Range<usize>]) -> Option<NarrowRows> {
        let shortest = cols.iter().map(Range::len).min()?;
        let longest = cols.iter().map(Range::len).max()?;
        let levels = shortest.checked_ilog2()?;
        let fits = width <= VECTORS * LANES
            && cols.len() <= LANES
            && levels <= MAX_LEVELS
            && longest <= 2 << levels;
        if !fits || !avx512() {
            return None;
        }
        let mut first = [0i32; LANES];
        let mut last = [0i32; LANES];
        for (i, c) in cols.iter().enumerate() {
            first[i] = c.start as i32;
            last[i] = (c.end - (1 << levels)) as i32;
        }
        Some(NarrowRows {
            width,
            outputs: cols.len(),
            levels,
            first,
            last,
        })
    }

    /// For each row window of `rows` (input rows `lo…` of `src`, each `width` wide), one row
    /// of `out`; a window holding a NaN goes to `with_nan(window, out_row)` instead.
    pub fn pool_rows(
        &self,
        src: &[f32],
        lo: usize,
        rows: &[Range<usize>],
        out: &mut [f32],
        mut with_nan: impl FnMut(&[f32], &mut [f32]),
    ) {
        let w = self.width;
        for (r, out) in rows.iter().zip(out.chunks_exact_mut(self.outputs)) {
            let window = &src[(r.start - lo) * w..(r.end - lo) * w];
            // SAFETY: `new` made this plan only where `avx512()` holds; `window` holds
            // whole rows of `w` and `out` one output row.
            if !unsafe { self.row(window, out) } {
                with_nan(window, out);
            }
        }
    }

    /// One output row; `false` (and `out` untouched) when the window holds a NaN.
    #[target_feature(enable = "avx512f,avx512dq")]
    fn row(&self, window: &[f32], out: &mut [f32]) -> bool {
        let w = self.width;
        let rows = window.len() / w;
        let mut v = [_mm512_setzero_ps(); VECTORS];
        let mut nan: __mmask16 = 0;
        for (b, v) in v.iter_mut().enumerate().take(w.div_ceil(LANES)) {
            let j = b * LANES;
            let m = mask(w - j);
            // SAFETY: lanes at or past `w` are masked off, so every load stays in row `r`.
            unsafe {
                let mut acc = _mm512_maskz_loadu_ps(m, window.as_ptr().add(j));
                nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(acc, acc);
                for r in 1..rows {
                    let x = _mm512_maskz_loadu_ps(m, window.as_ptr().add(r * w + j));
                    nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
                    acc = _mm512_max_ps(acc, x);
                }
                *v = acc;
            }
        }
        if nan != 0 {
            return false;
        }
        for k in 1..=self.levels {
            for b in 0..VECTORS {
                let next = if b + 1 < VECTORS {
                    v[b + 1]
                } else {
                    _mm512_setzero_ps()
                };
                v[b] = _mm512_max_ps(v[b], shift(v[b], next, 1 << (k - 1)));
            }
        }
        let a = gather(&v, &self.first);
        let b = gather(&v, &self.last);
        let m = mask(self.outputs);
        // SAFETY: the first `outputs` lanes, all inside `out`.
        unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr(), m, _mm512_max_ps(a, b)) };
        true
    }
}

/// Lane `i` of the result is lane `idx[i]` (below 64) of the row `v`.
#[target_feature(enable = "avx512f")]
fn gather(v: &[__m512; VECTORS], idx: &[i32; LANES]) -> __m512 {
    // SAFETY: `idx` is 16 `i32`s, one unaligned vector.
    let i: __m512i = unsafe { _mm512_loadu_si512(idx.as_ptr().cast()) };
    let low = _mm512_permutex2var_ps(v[0], i, v[1]);
    let high = _mm512_permutex2var_ps(v[2], i, v[3]);
    let upper = idx
        .iter()
        .enumerate()
        .fold(0u16, |m, (l, &x)| m | (u16::from(x >= 32) << l));
    _mm512_mask_blend_ps(upper, low, high)
}

/// Lanes `s..16` of `lo` followed by lanes `0..s` of `hi` (`s` of 1, 2, 4 or 8).
#[target_feature(enable = "avx512f")]
fn shift(lo: __m512, hi: __m512, s: usize) -> __m512 {
    let (lo, hi) = (_mm512_castps_si512(lo), _mm512_castps_si512(hi));
    _mm512_castsi512_ps(match s {
        1 => _mm512_alignr_epi32::<1>(hi, lo),
        2 => _mm512_alignr_epi32::<2>(hi, lo),
        4 => _mm512_alignr_epi32::<4>(hi, lo),
        _ => _mm512_alignr_epi32::<8>(hi, lo),
    })
}

/// The first `min(n, 16)` lanes.
#[inline(always)]
fn mask(n: usize) -> __mmask16 {
    ((1u32 << n.min(LANES)) - 1) as __mmask16
}
