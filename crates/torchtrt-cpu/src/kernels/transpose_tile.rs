//! A 16 × 16 tile of 32-bit elements transposed in AVX-512 registers: sixteen loads, three
//! rounds of shuffles (pairs of elements, pairs of pairs, then 128-bit quarters), sixteen
//! stores, where element-by-element moves take a load and a store each.

/// Writes the transpose of the 16 × 16 tile at `src` (rows `src_stride` elements apart)
/// to `dst` (rows `dst_stride` apart): `dst[i · dst_stride + j] = src[j · src_stride + i]`.
///
/// # Safety
/// The CPU has AVX-512F; the sixteen rows of sixteen elements at `src` are readable and
/// those at `dst` writable.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose16(
    src: *const u32,
    src_stride: usize,
    dst: *mut u32,
    dst_stride: usize,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the sixteen rows lie where the contract says.
    unsafe {
        let mut r = [_mm512_setzero_ps(); 16];
        for (i, row) in r.iter_mut().enumerate() {
            *row = _mm512_loadu_ps(src.add(i * src_stride).cast());
        }
        let mut t = [_mm512_setzero_ps(); 16];
        for (i, x) in t.iter_mut().enumerate() {
            let (a, b) = (r[i & !1], r[i | 1]);
            *x = if i % 2 == 0 {
                _mm512_unpacklo_ps(a, b)
            } else {
                _mm512_unpackhi_ps(a, b)
            };
        }
        let mut u = [_mm512_setzero_ps(); 16];
        for (i, x) in u.iter_mut().enumerate() {
            let (base, m) = (i & !3, i % 4);
            let (a, b) = (
                _mm512_castps_pd(t[base + m / 2]),
                _mm512_castps_pd(t[base + m / 2 + 2]),
            );
            *x = _mm512_castpd_ps(if m % 2 == 0 {
                _mm512_unpacklo_pd(a, b)
            } else {
                _mm512_unpackhi_pd(a, b)
            });
        }
        for m in 0..4 {
            let p = [u[m], u[4 + m], u[8 + m], u[12 + m]];
            let s = [
                _mm512_shuffle_f32x4::<0x44>(p[0], p[1]),
                _mm512_shuffle_f32x4::<0xEE>(p[0], p[1]),
                _mm512_shuffle_f32x4::<0x44>(p[2], p[3]),
                _mm512_shuffle_f32x4::<0xEE>(p[2], p[3]),
            ];
            let out = [
                _mm512_shuffle_f32x4::<0x88>(s[0], s[2]),
                _mm512_shuffle_f32x4::<0xDD>(s[0], s[2]),
                _mm512_shuffle_f32x4::<0x88>(s[1], s[3]),
                _mm512_shuffle_f32x4::<0xDD>(s[1], s[3]),
            ];
            for (k, v) in out.into_iter().enumerate() {
                _mm512_storeu_ps(dst.add((4 * k + m) * dst_stride).cast(), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tiles_transpose() {
        if !crate::simd::v4() {
            return;
        }
        let (ss, ds) = (19, 23);
        let src: Vec<u32> = (0..16 * ss as u32).map(|v| v * 7 + 1).collect();
        let mut dst = vec![0u32; 16 * ds];
        // SAFETY: AVX-512 checked; both buffers hold sixteen rows of their strides.
        unsafe { super::transpose16(src.as_ptr(), ss, dst.as_mut_ptr(), ds) };
        for i in 0..16 {
            for j in 0..16 {
                assert_eq!(dst[i * ds + j], src[j * ss + i], "({i}, {j})");
            }
        }
    }
}
