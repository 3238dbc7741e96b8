//! The vector operations the short-row kernels are written in, for AVX-512 (sixteen lanes,
//! a bit mask for the last vector) and AVX2 (eight lanes, a lane mask).
//!
//! Every operation is `#[inline(always)]` and needs its instruction set: the
//! `#[target_feature]` entry points of `super::kernels` inline them, so they compile for it.

use std::arch::x86_64::*;

/// One instruction set's f32 vectors.
pub(super) trait Lanes: Copy {
    /// f32 lanes of one vector.
    const N: usize;
    /// A vector.
    type V: Copy;
    /// Which lanes of a row's last vector hold values.
    type Mask: Copy;

    /// The mask of a row of `len ≥ 1` values' last vector.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn last_mask(len: usize) -> Self::Mask;
    /// `x` in every lane.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn splat(x: f32) -> Self::V;
    /// `N` values from `p`.
    ///
    /// # Safety
    /// The instruction set is available; `p` points at `N` readable values.
    unsafe fn load(p: *const f32) -> Self::V;
    /// The lanes of `mask` from `p`, the others `fill`.
    ///
    /// # Safety
    /// The instruction set is available; the lanes of `mask` are readable at `p`.
    unsafe fn load_masked(p: *const f32, mask: Self::Mask, fill: Self::V) -> Self::V;
    /// `v` to `N` values at `p`.
    ///
    /// # Safety
    /// The instruction set is available; `p` points at `N` writable values.
    unsafe fn store(p: *mut f32, v: Self::V);
    /// The lanes of `mask` of `v` to `p`.
    ///
    /// # Safety
    /// The instruction set is available; the lanes of `mask` are writable at `p`.
    unsafe fn store_masked(p: *mut f32, mask: Self::Mask, v: Self::V);
    /// `a + b`.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// `a − b`.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn sub(a: Self::V, b: Self::V) -> Self::V;
    /// `a · b`.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn mul(a: Self::V, b: Self::V) -> Self::V;
    /// The larger of `a`, `b` (`b` where either is NaN).
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn max(a: Self::V, b: Self::V) -> Self::V;
    /// The smaller of `a`, `b` (`b` where either is NaN).
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn min(a: Self::V, b: Self::V) -> Self::V;
    /// `eˣ` lane by lane for arguments `≤ 0` (as a softmax takes them after subtracting the
    /// maximum), bit for bit [`crate::math::exp_f32_with`] with fused steps.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn exp_nonpositive(x: Self::V) -> Self::V;
    /// Whether any lane of any of `row` is NaN.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn any_nan<const NV: usize>(row: &[Self::V; NV]) -> bool;
    /// The sum of the lanes.
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn sum_lanes(v: Self::V) -> f32;
    /// The largest lane (NaN lanes are not seen reliably: test with [`Self::any_nan`]).
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn max_lanes(v: Self::V) -> f32;
    /// The smallest lane (as [`Self::max_lanes`]).
    ///
    /// # Safety
    /// The instruction set is available.
    unsafe fn min_lanes(v: Self::V) -> f32;
}

/// AVX-512 F: sixteen lanes.
#[derive(Clone, Copy)]
pub(super) struct Avx512;

impl Lanes for Avx512 {
    const N: usize = 16;
    type V = __m512;
    type Mask = u16;

    #[inline(always)]
    unsafe fn last_mask(len: usize) -> u16 {
        u16::MAX >> (len.div_ceil(16) * 16 - len)
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: u16, fill: __m512) -> __m512 {
        unsafe { _mm512_mask_loadu_ps(fill, mask, p) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, mask: u16, v: __m512) {
        unsafe { _mm512_mask_storeu_ps(p, mask, v) }
    }
    #[inline(always)]
    unsafe fn add(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn max(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn min(a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn exp_nonpositive(x: __m512) -> __m512 {
        unsafe { crate::math::avx512::exp(x) }
    }
    #[inline(always)]
    unsafe fn any_nan<const NV: usize>(row: &[__m512; NV]) -> bool {
        row.iter().fold(0, |m, &v| {
            m | unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v) }
        }) != 0
    }
    #[inline(always)]
    unsafe fn sum_lanes(v: __m512) -> f32 {
        unsafe { _mm512_reduce_add_ps(v) }
    }
    #[inline(always)]
    unsafe fn max_lanes(v: __m512) -> f32 {
        unsafe { _mm512_reduce_max_ps(v) }
    }
    #[inline(always)]
    unsafe fn min_lanes(v: __m512) -> f32 {
        unsafe { _mm512_reduce_min_ps(v) }
    }
}

/// AVX2 and FMA: eight lanes.
#[derive(Clone, Copy)]
pub(super) struct Avx2;

impl Avx2 {
    /// The four lanes of `v`'s two halves combined by `op`, then the two pairs of those,
    /// then the last two: the lanes folded in three steps.
    #[inline(always)]
    unsafe fn fold_lanes(v: __m256, op: impl Fn(__m128, __m128) -> __m128) -> f32 {
        unsafe {
            let q = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let d = op(q, _mm_movehl_ps(q, q));
            _mm_cvtss_f32(op(d, _mm_movehdup_ps(d)))
        }
    }
}

impl Lanes for Avx2 {
    const N: usize = 8;
    type V = __m256;
    type Mask = __m256i;

    #[inline(always)]
    unsafe fn last_mask(len: usize) -> __m256i {
        let valid = ((len + 7) % 8 + 1) as i32;
        unsafe {
            _mm256_cmpgt_epi32(
                _mm256_set1_epi32(valid),
                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            )
        }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn load_masked(p: *const f32, mask: __m256i, fill: __m256) -> __m256 {
        unsafe { _mm256_blendv_ps(fill, _mm256_maskload_ps(p, mask), _mm256_castsi256_ps(mask)) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    unsafe fn store_masked(p: *mut f32, mask: __m256i, v: __m256) {
        unsafe { _mm256_maskstore_ps(p, mask, v) }
    }
    #[inline(always)]
    unsafe fn add(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn sub(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn mul(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn max(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn min(a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn exp_nonpositive(x: __m256) -> __m256 {
        unsafe { crate::math::avx2::exp_nonpositive(x) }
    }
    #[inline(always)]
    unsafe fn any_nan<const NV: usize>(row: &[__m256; NV]) -> bool {
        let nan = row
            .iter()
            .fold(unsafe { _mm256_setzero_ps() }, |m, &v| unsafe {
                _mm256_or_ps(m, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v))
            });
        unsafe { _mm256_movemask_ps(nan) != 0 }
    }
    #[inline(always)]
    unsafe fn sum_lanes(v: __m256) -> f32 {
        unsafe { Self::fold_lanes(v, |a, b| _mm_add_ps(a, b)) }
    }
    #[inline(always)]
    unsafe fn max_lanes(v: __m256) -> f32 {
        unsafe { Self::fold_lanes(v, |a, b| _mm_max_ps(a, b)) }
    }
    #[inline(always)]
    unsafe fn min_lanes(v: __m256) -> f32 {
        unsafe { Self::fold_lanes(v, |a, b| _mm_min_ps(a, b)) }
    }
}
