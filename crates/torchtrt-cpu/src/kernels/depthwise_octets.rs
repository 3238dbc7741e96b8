//! Depthwise 2-D convolution of f32 planes with eight channels along the vector lanes, on
//! AVX2 and FMA: [`super::depthwise_lanes`]'s blocking for CPUs without AVX-512, each
//! position's eight channels one 256-bit vector. A block of eight channels is interleaved
//! into a zero-padded buffer (eight positions of eight channels at a time, through an 8 × 8
//! transpose in registers), each output position accumulates its channels tap by tap (up to
//! eight positions of a row sharing each tap's weights), and each run of positions gets the
//! fused activation and is transposed back into the channels' planes while still in
//! registers.

use super::convolution::ConvGeom;
use super::depthwise_lanes::{PaddedPlane, groups, row_groups};
use crate::linalg::Epilogue;

/// Channels per block: the lanes of one AVX2 vector of f32.
pub(super) const LANES: usize = 8;

/// One position's values for the block's channels.
type Lanes = [f32; LANES];

/// A block's buffers: the padded, channel-interleaved input (its padding zeroed once: a
/// task's blocks share one geometry) and the taps' weights.
#[derive(Default)]
pub(super) struct Scratch {
    padded: Vec<Lanes>,
    weights: Vec<Lanes>,
}

/// A layer's operands but for its input: the geometry, the `C · taps` weights, the bias
/// (`C` values, when given) and the fused activation.
pub(super) struct Layer<'a> {
    pub(super) geom: &'a ConvGeom,
    pub(super) w: &'a [f32],
    pub(super) bias: Option<&'a [f32]>,
    pub(super) epilogue: Epilogue,
}

/// The inner loop's operands: the padded interleaved input, the taps' weights and offsets,
/// the bias, the step between two output positions of a row, and where the outputs go:
/// `lanes` channel planes of `plane` positions from `dst`, with `epilogue` applied.
struct Rows<'a> {
    padded: &'a [Lanes],
    weights: &'a [Lanes],
    offsets: &'a [usize],
    bias: Lanes,
    step: usize,
    dst: *mut f32,
    plane: usize,
    lanes: usize,
    epilogue: Epilogue,
}

#[cfg(target_arch = "x86_64")]
impl Rows<'_> {
    /// `N` output positions of one row, the first's window at `at` in `padded` and the
    /// first's index among the outputs `first`, written to each channel's plane.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA, `at + (N - 1) · step + offset < padded.len()` for every
    /// offset, and `first + N ≤ plane` where the `lanes` planes at `dst` are this call's.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn group<const N: usize>(&self, at: usize, first: usize) {
        use std::arch::x86_64::*;
        // SAFETY: `bias` is one vector.
        let mut acc = [unsafe { _mm256_loadu_ps(self.bias.as_ptr()) }; N];
        let base = self.padded.as_ptr().wrapping_add(at);
        for (w, &offset) in self.weights.iter().zip(self.offsets) {
            // SAFETY: `w` is one vector.
            let w = unsafe { _mm256_loadu_ps(w.as_ptr()) };
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: as the caller's promise.
                let x = unsafe { _mm256_loadu_ps(base.add(offset + i * self.step).cast()) };
                *a = _mm256_fmadd_ps(x, w, *a);
            }
        }
        for a in &mut acc {
            *a = self.epilogue.vector8(*a);
        }
        let dst = self.dst.wrapping_add(first);
        if N == LANES {
            let rows = transpose(std::array::from_fn(|i| acc[i]));
            for (l, row) in rows.iter().enumerate().take(self.lanes) {
                // SAFETY: positions `first..first + 8` of plane `l` (the caller's promise).
                unsafe { _mm256_storeu_ps(dst.add(l * self.plane), *row) };
            }
            return;
        }
        let mut positions = [[0f32; LANES]; N];
        for (p, a) in positions.iter_mut().zip(acc) {
            // SAFETY: `p` is one vector.
            unsafe { _mm256_storeu_ps(p.as_mut_ptr(), a) };
        }
        for l in 0..self.lanes {
            for (i, p) in positions.iter().enumerate() {
                // SAFETY: position `first + i` of plane `l` (the caller's promise).
                unsafe { *dst.add(l * self.plane + i) = p[l] };
            }
        }
    }
}

/// The 8 × 8 transpose of `rows`: lane `j` of vector `i` becomes lane `i` of vector `j`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn transpose(rows: [std::arch::x86_64::__m256; LANES]) -> [std::arch::x86_64::__m256; LANES] {
    use std::arch::x86_64::*;
    let [r0, r1, r2, r3, r4, r5, r6, r7] = rows;
    let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
    let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
    let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
    let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ]
}

/// Row `y` of the block's `lanes` channel planes (`plane_in` apart from `src`, rows `iw`
/// long) into `into`, one position (eight channels, zero past `lanes`) at a time: eight
/// positions through one transpose, the rest one by one.
///
/// # Safety
/// The CPU has AVX2 and FMA; the `lanes` (at most eight) planes hold row `y`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn interleave_row(
    src: &[f32],
    plane_in: usize,
    iw: usize,
    y: usize,
    lanes: usize,
    into: &mut [Lanes],
) {
    use std::arch::x86_64::*;
    let row = |l: usize| &src[l * plane_in + y * iw..][..iw];
    let whole = iw / LANES * LANES;
    for x in (0..whole).step_by(LANES) {
        let loaded = std::array::from_fn(|l| {
            if l < lanes {
                // SAFETY: positions `x..x + 8` of the row exist (`x + 8 ≤ iw`).
                unsafe { _mm256_loadu_ps(row(l)[x..].as_ptr()) }
            } else {
                _mm256_setzero_ps()
            }
        });
        for (p, v) in into[x..x + LANES].iter_mut().zip(transpose(loaded)) {
            // SAFETY: `p` is one vector.
            unsafe { _mm256_storeu_ps(p.as_mut_ptr(), v) };
        }
    }
    for l in 0..lanes {
        for (p, &v) in into[whole..iw].iter_mut().zip(&row(l)[whole..]) {
            p[l] = v;
        }
    }
}

/// The channels `first..first + dst.len() / plane_out` (at most [`LANES`]) of one image,
/// whose `C` input planes `image` holds.
///
/// # Safety
/// The CPU has AVX2 and FMA, and the layer satisfies [`super::depthwise_lanes::applies`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn block(
    layer: &Layer<'_>,
    image: &[f32],
    first: usize,
    dst: &mut [f32],
    scratch: &mut Scratch,
) {
    let Layer {
        geom,
        w,
        bias,
        epilogue,
    } = *layer;
    let win = &geom.window;
    let [_, ih, iw] = win.input;
    let [_, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let [_, sh, sw] = win.stride;
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    let (plane_in, plane_out, taps) = (ih * iw, oh * ow, kh * kw);
    let lanes = dst.len() / plane_out;
    let PaddedPlane {
        height,
        width,
        offsets,
    } = PaddedPlane::of(win, 1);
    let Scratch { padded, weights } = scratch;
    if padded.len() != height * width {
        padded.clear();
        padded.resize(height * width, [0.0; LANES]);
    }
    weights.clear();
    weights.resize(taps, [0.0; LANES]);
    let mut b = [0.0; LANES];
    let block = &image[first * plane_in..(first + lanes) * plane_in];
    for y in 0..ih {
        let at = (y + pt) * width + pl;
        // SAFETY: the block's `lanes` planes hold every row; `v3()` holds (the contract).
        unsafe { interleave_row(block, plane_in, iw, y, lanes, &mut padded[at..at + iw]) };
    }
    for l in 0..lanes {
        let c = first + l;
        for (t, &v) in w[c * taps..(c + 1) * taps].iter().enumerate() {
            weights[t][l] = v;
        }
        b[l] = bias.map_or(0.0, |bias| bias[c]);
    }
    let rows = Rows {
        padded,
        weights,
        offsets: &offsets[..taps],
        bias: b,
        step: sw,
        dst: dst.as_mut_ptr(),
        plane: plane_out,
        lanes,
        epilogue,
    };
    for (at, first, n) in row_groups([oh, ow], [sh, sw], width) {
        // SAFETY: the `n` positions from output `first` read their windows inside `padded`
        // (its sides cover every window) and lie in each of `dst`'s `lanes` planes.
        unsafe { groups!(rows, n, at, first) };
    }
}
