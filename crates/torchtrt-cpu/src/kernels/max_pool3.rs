//! 2-D max pooling of f32 planes with a 3×3 window, row stride 1 or 2, column stride 2,
//! no dilation, any padding: each output row is the max of the (up to three) input rows its windows cover,
//! taken in one pass into a row padded with −∞, then of three neighbouring columns of that
//! row. Planes run in parallel; the loops are compiled for AVX-512 or AVX2 where the CPU has
//! them, with the stride-2 column step written with AVX-512 permutes.

use crate::linalg::Window;
use crate::parallel::for_each_row;

/// Whether [`run`] pools this window.
pub(super) fn applies(w: &Window) -> bool {
    w.input[0] == 1
        && w.output[0] == 1
        && w.kernel == [1, 3, 3]
        && w.dilation == [1, 1, 1]
        && w.pad_begin[0] == 0
        && w.pad_end[0] == 0
        && matches!(w.stride[1], 1 | 2)
        && w.stride[2] == 2
}

/// Max-pools every plane of `x` into `out` (planes of `w.input` in, of `w.output` out);
/// `w` must satisfy [`applies`].
pub(super) fn run(w: &Window, x: &[f32], out: &mut [f32]) {
    let (plane_in, plane_out) = (w.input[1] * w.input[2], w.output[1] * w.output[2]);
    for_each_row(
        out,
        plane_out,
        plane_out * 9,
        Vec::new,
        |scratch, p, dst| {
            plane(w, &x[p * plane_in..(p + 1) * plane_in], dst, scratch);
        },
    );
}

/// Slack of −∞ after a padded row, so the vector column loop never runs short of input.
const SLACK: usize = 40;

/// One plane, dispatched on the row stride and the CPU's vector width.
fn plane(w: &Window, src: &[f32], dst: &mut [f32], scratch: &mut Vec<f32>) {
    macro_rules! versions {
        ($name:ident, $wide:expr, $($feature:literal)?) => {
            $(#[target_feature(enable = $feature)])?
            fn $name(w: &Window, src: &[f32], dst: &mut [f32], row: &mut Vec<f32>) {
                if w.stride[1] == 1 {
                    plane_body::<1>(w, src, dst, row, $wide)
                } else {
                    plane_body::<2>(w, src, dst, row, $wide)
                }
            }
        };
    }
    versions!(generic, columns_s2,);
    #[cfg(target_arch = "x86_64")]
    {
        #[inline(always)]
        fn columns_s2_v4(row: &[f32], out: &mut [f32]) {
            // SAFETY: only reached from `v4`, which runs on CPUs with AVX-512 F.
            let done = unsafe { columns_s2_avx512(row, out) };
            columns_s2(&row[2 * done..], &mut out[done..]);
        }
        versions!(v4, columns_s2_v4, "avx512f,avx2,fma");
        versions!(v3, columns_s2, "avx2,fma");
        if crate::simd::v4() {
            // SAFETY: `v4()` holds only when the CPU has AVX-512 F, AVX2 and FMA.
            return unsafe { v4(w, src, dst, scratch) };
        }
        if crate::simd::v3() {
            // SAFETY: `v3()` holds only when the CPU has AVX2 and FMA.
            return unsafe { v3(w, src, dst, scratch) };
        }
    }
    generic(w, src, dst, scratch)
}

#[inline(always)]
fn max(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// The rows of one plane: the window rows of output row `r` reduced into `row` (padding
/// columns stay −∞), then `columns` reduces each output's three columns.
#[inline(always)]
fn plane_body<const SH: usize>(
    w: &Window,
    src: &[f32],
    dst: &mut [f32],
    row: &mut Vec<f32>,
    columns: impl Fn(&[f32], &mut [f32]),
) {
    let [_, ih, iw] = w.input;
    let ow = w.output[2];
    let (pt, pl) = (w.pad_begin[1], w.pad_begin[2]);
    let width = (pl + iw).max((ow - 1) * 2 + 3) + SLACK;
    row.clear();
    row.resize(width, f32::NEG_INFINITY);
    for (r, out) in dst.chunks_exact_mut(ow).enumerate() {
        window_rows(src, iw, ih, r * SH, pt, &mut row[pl..pl + iw]);
        columns(row, out);
    }
}

/// Reduces into `inside` the input rows (of `ih` rows of `iw`) that the window rows
/// `top - pt .. top - pt + 3` cover.
#[inline(always)]
fn window_rows(src: &[f32], iw: usize, ih: usize, top: usize, pt: usize, inside: &mut [f32]) {
    let top = top as isize - pt as isize;
    let lo = top.clamp(0, ih as isize) as usize;
    let hi = (top + 3).clamp(0, ih as isize) as usize;
    let line = |y: usize| &src[y * iw..(y + 1) * iw];
    match hi - lo {
        0 => inside.fill(f32::NEG_INFINITY),
        1 => inside.copy_from_slice(line(lo)),
        2 => {
            for (o, (&a, &b)) in inside.iter_mut().zip(line(lo).iter().zip(line(lo + 1))) {
                *o = max(a, b);
            }
        }
        _ => {
            let rows = line(lo).iter().zip(line(lo + 1)).zip(line(lo + 2));
            for (o, ((&a, &b), &c)) in inside.iter_mut().zip(rows) {
                *o = max(max(a, b), c);
            }
        }
    }
}

/// `out[j] = max(row[2j], row[2j + 1], row[2j + 2])`.
#[inline(always)]
fn columns_s2(row: &[f32], out: &mut [f32]) {
    let taps = row.chunks_exact(2).zip(row[2..].chunks_exact(2));
    for (o, (ab, c)) in out.iter_mut().zip(taps) {
        *o = max(max(ab[0], ab[1]), c[0]);
    }
}

/// [`columns_s2`] sixteen outputs at a time while the row has 34 values left; returns how
/// many outputs it wrote.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn columns_s2_avx512(row: &[f32], out: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let mut j = 0;
    while j + 16 <= out.len() && 2 * j + 34 <= row.len() {
        // SAFETY: the loop condition keeps the loads within `row[2j..2j + 34]` and the store
        // within `out[j..j + 16]`.
        unsafe {
            let p = row.as_ptr().add(2 * j);
            let (a, b) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
            let (c, d) = (_mm512_loadu_ps(p.add(2)), _mm512_loadu_ps(p.add(18)));
            let pairs = _mm512_max_ps(
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            );
            let m = _mm512_max_ps(pairs, _mm512_permutex2var_ps(c, even, d));
            _mm512_storeu_ps(out.as_mut_ptr().add(j), m);
        }
        j += 16;
    }
    j
}
