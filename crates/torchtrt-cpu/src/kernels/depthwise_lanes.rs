//! Depthwise 2-D convolution of f32 planes with sixteen channels along the vector lanes,
//! for small planes (7×7 and 14×14 outputs; up to 112×112 on AVX2), on AVX-512. Plane by plane
//! ([`super::conv_direct`]) such planes fill under half of each vector and pay a padded copy
//! and a call per plane; here a block of sixteen channels is gathered once into a
//! zero-padded, channel-interleaved buffer, every output position is one vector of its
//! sixteen channels (each tap one aligned load and one product with that tap's sixteen
//! weights, up to eight positions of a row sharing the weight load), and the results are
//! gathered back into the channels' planes. Any kernel, stride, dilation and padding.
//! Without AVX-512 (AVX2 and FMA), [`super::depthwise_octets`] runs the same blocking with
//! eight channels per block.

use rayon::prelude::*;

use super::convolution::ConvGeom;
use super::depthwise_octets;
use crate::linalg::{Epilogue, Window};
use crate::simd::first_lanes;

/// Lanes of one vector: channels per block.
const LANES: usize = 16;
/// Output positions of one row computed at once.
const GROUP: usize = 8;
/// Most output positions per plane this kernel takes on AVX-512 (14×14 = 196).
const MOST_OUTPUTS: usize = 256;
/// Most output positions per plane on AVX2 (112×112): blocks of eight channels, interleaved
/// and written back through 8 × 8 transposes, beat the plane kernel's rows of eight lanes on
/// EfficientNet-B0's layers at batch 2 on a 2-core Zen 3 (with SiLU: 3×3 on 112×112 with 32
/// channels 1.05–1.12 → 0.84–0.87 ms, 3×3 on 56×56 with 144 channels 0.96 → 0.75–0.86 ms).
const MOST_OUTPUTS_AVX2: usize = 112 * 112;

/// The most output positions per plane this kernel takes on this CPU.
fn most_outputs() -> usize {
    if crate::simd::v4() {
        MOST_OUTPUTS
    } else {
        MOST_OUTPUTS_AVX2
    }
}

/// Most taps per kernel (7×7 = 49); larger kernels stay with the plane kernel.
pub(super) const MOST_TAPS: usize = 64;

/// Whether [`run`] convolves this layer on this CPU (AVX2 and FMA at least): depthwise (one
/// input and one output channel per group), 2-D, small output planes, more than one tap. A
/// one-tap layer is a per-channel affine map, which the plane kernel computes as the
/// separate multiply and add it was fused from (the same roundings; a fused multiply-add
/// would round once).
pub(super) fn applies(geom: &ConvGeom) -> bool {
    let w = &geom.window;
    crate::simd::v3()
        && geom.groups == geom.channels
        && geom.out_channels == geom.channels
        && w.input[0] == 1
        && w.kernel[0] == 1
        && w.output[0] == 1
        && w.pad_begin[0] == 0
        && (1..=most_outputs()).contains(&w.output_len())
        && (2..=MOST_TAPS).contains(&w.kernel_len())
        && w.input_len() <= i32::MAX as usize / LANES
}

/// The runs of at most [`GROUP`] positions of each output row of an `output` plane, in
/// order: where the first one's window starts in the padded input of rows `width`
/// positions long, the first one's index among the outputs, and how many there are.
pub(super) fn row_groups(
    output: [usize; 2],
    stride: [usize; 2],
    width: usize,
) -> impl Iterator<Item = (usize, usize, usize)> {
    let ([oh, ow], [sh, sw]) = (output, stride);
    (0..oh).flat_map(move |oy| {
        (0..ow).step_by(GROUP).map(move |ox| {
            (
                oy * sh * width + ox * sw,
                oy * ow + ox,
                (ow - ox).min(GROUP),
            )
        })
    })
}

/// The zero-padded plane a block of channels is interleaved into: its rows and row length in
/// positions, which cover every window of the layer, and each tap's offset from its window's
/// first position in elements ([`PaddedPlane::of`]'s `unit` to a position).
pub(super) struct PaddedPlane {
    pub(super) height: usize,
    pub(super) width: usize,
    pub(super) offsets: [usize; MOST_TAPS],
}

impl PaddedPlane {
    /// The padded plane of the 2-D window `win` of at most [`MOST_TAPS`] taps, its tap
    /// offsets scaled by `unit` (the elements of one position).
    pub(super) fn of(win: &Window, unit: usize) -> PaddedPlane {
        let [_, ih, iw] = win.input;
        let [_, kh, kw] = win.kernel;
        let [_, oh, ow] = win.output;
        let [_, sh, sw] = win.stride;
        let [_, dh, dw] = win.dilation;
        let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
        let height = ((oh - 1) * sh + (kh - 1) * dh + 1).max(pt + ih);
        let width = ((ow - 1) * sw + (kw - 1) * dw + 1).max(pl + iw);
        let mut offsets = [0; MOST_TAPS];
        for ky in 0..kh {
            for kx in 0..kw {
                offsets[ky * kw + kx] = (ky * dh * width + kx * dw) * unit;
            }
        }
        PaddedPlane {
            height,
            width,
            offsets,
        }
    }
}

/// `$rows.group::<N>($at, $into)` for the run length `$n` (1 to [`GROUP`]), each length its
/// own unrolled loop.
macro_rules! groups {
    ($rows:expr, $n:expr, $at:expr, $into:expr) => {
        match $n {
            1 => $rows.group::<1>($at, $into),
            2 => $rows.group::<2>($at, $into),
            3 => $rows.group::<3>($at, $into),
            4 => $rows.group::<4>($at, $into),
            5 => $rows.group::<5>($at, $into),
            6 => $rows.group::<6>($at, $into),
            7 => $rows.group::<7>($at, $into),
            _ => $rows.group::<8>($at, $into),
        }
    };
}
pub(super) use groups;

/// A block's buffers: the padded, channel-interleaved input (its padding zeroed once: a
/// task's blocks share one geometry), the interleaved outputs and the taps' weights.
#[derive(Default)]
struct Scratch {
    padded: Vec<f32>,
    outputs: Vec<f32>,
    weights: Vec<f32>,
}

/// Convolves `x` (`[N, C, H, W]`) with `w` (`[C, 1, kh, kw]`) and `bias` into `out`, then
/// applies `epilogue`; the layer must satisfy [`applies`].
pub(super) fn run(
    geom: &ConvGeom,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    epilogue: Epilogue,
    out: &mut [f32],
) {
    if !crate::simd::v4() {
        let layer = depthwise_octets::Layer {
            geom,
            w,
            bias,
            epilogue,
        };
        let lanes = depthwise_octets::LANES;
        return blocks(geom, x, out, lanes, |scratch, first, image, dst| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `applies` checked that the CPU has AVX2 and FMA; `dst` is the planes
            // of channels `first..` of this image and `image` the image's input planes.
            unsafe {
                depthwise_octets::block(&layer, image, first, dst, scratch)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (&layer, first, dst, scratch, image);
        });
    }
    blocks(
        geom,
        x,
        out,
        LANES,
        |scratch: &mut Scratch, first, image, dst| {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `v4()` holds only when the CPU has AVX-512 F; `dst` is the planes of
            // channels `first..` of this image and `image` the image's input planes.
            unsafe {
                block(geom, image, w, bias, epilogue, first, dst, scratch)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (first, dst, scratch, image);
        },
    )
}

/// Runs `f(scratch, first, image, dst)` for every block of `lanes` channels of every
/// image, in parallel: `image` is the image's input planes, `dst` the output planes of its
/// channels `first..first + lanes` (fewer for an image's last block).
fn blocks<S: Default>(
    geom: &ConvGeom,
    x: &[f32],
    out: &mut [f32],
    lanes: usize,
    f: impl Fn(&mut S, usize, &[f32], &mut [f32]) + Sync + Send,
) {
    let c = geom.channels;
    let (plane_in, plane_out) = (geom.window.input_len(), geom.window.output_len());
    let block_out = lanes * plane_out;
    let work = (block_out * geom.window.kernel_len()).max(1);
    let min_blocks = (1 << 16) / work + 1;
    out.par_chunks_mut(c * plane_out)
        .zip(x.par_chunks(c * plane_in))
        .for_each(|(image_out, image)| {
            image_out
                .par_chunks_mut(block_out)
                .enumerate()
                .with_min_len(min_blocks)
                .for_each_init(S::default, |scratch, (b, dst)| {
                    f(scratch, b * lanes, image, dst)
                });
        });
}

/// The channels `first..first + dst.len() / plane_out` (at most sixteen) of one image.
///
/// # Safety
/// The CPU has AVX-512 F; `image` holds the image's `C` input planes, `w` the layer's
/// `C · taps` weights and `bias` (when given) `C` values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    geom: &ConvGeom,
    image: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    epilogue: Epilogue,
    first: usize,
    dst: &mut [f32],
    scratch: &mut Scratch,
) {
    use std::arch::x86_64::*;
    let win = &geom.window;
    let [_, ih, iw] = win.input;
    let [_, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let [_, sh, sw] = win.stride;
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    let (plane_in, plane_out, taps) = (ih * iw, oh * ow, kh * kw);
    let lanes = dst.len() / plane_out;
    let mask = first_lanes(lanes);
    let PaddedPlane {
        height,
        width,
        offsets,
    } = PaddedPlane::of(win, LANES);
    let Scratch {
        padded,
        outputs,
        weights,
    } = scratch;
    if padded.len() != height * width * LANES {
        padded.clear();
        padded.resize(height * width * LANES, 0.0);
    }
    outputs.resize(plane_out * LANES, 0.0);
    weights.resize(taps * LANES, 0.0);
    let lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let across = |step: usize| _mm512_mullo_epi32(lane, _mm512_set1_epi32(step as i32));
    let (planes, by_tap, by_position) = (across(plane_in), across(taps), across(LANES));
    let zero = _mm512_setzero_ps();
    let src = image.as_ptr().wrapping_add(first * plane_in);
    for y in 0..ih {
        for x in 0..iw {
            let at = ((y + pt) * width + x + pl) * LANES;
            // SAFETY: lane `l` (set in `mask`) reads input plane `first + l < C` at
            // `y · iw + x`, inside `image`; the store is a vector of `padded`.
            unsafe {
                let v =
                    _mm512_mask_i32gather_ps::<4>(zero, mask, planes, src.add(y * iw + x).cast());
                _mm512_storeu_ps(padded.as_mut_ptr().add(at), v);
            }
        }
    }
    let taps_at = w.as_ptr().wrapping_add(first * taps);
    for t in 0..taps {
        // SAFETY: lane `l` (set in `mask`) reads weight `t` of channel `first + l < C`.
        unsafe {
            let v = _mm512_mask_i32gather_ps::<4>(zero, mask, by_tap, taps_at.add(t).cast());
            _mm512_storeu_ps(weights.as_mut_ptr().add(t * LANES), v);
        }
    }
    let b = match bias {
        // SAFETY: the lanes set in `mask` are channels `first + l < C` of `bias`.
        Some(bias) => unsafe { _mm512_maskz_loadu_ps(mask, bias.as_ptr().add(first)) },
        None => zero,
    };
    let rows = Rows {
        padded,
        weights,
        offsets: &offsets[..taps],
        bias: b,
        epilogue,
        step: sw * LANES,
    };
    for (at, first, n) in row_groups([oh, ow], [sh, sw], width) {
        let into = &mut outputs[first * LANES..(first + n) * LANES];
        // SAFETY: the `n` positions from output `first` read their windows inside `padded`
        // (its sides cover every window).
        unsafe { groups!(rows, n, at * LANES, into) };
    }
    for (l, plane) in dst.chunks_exact_mut(plane_out).enumerate() {
        for p in (0..plane_out).step_by(LANES) {
            let m = first_lanes(plane_out - p);
            // SAFETY: lane `i` (set in `m`) reads channel `l` of position `p + i <
            // plane_out` in `outputs` and writes it to the plane.
            unsafe {
                let from = outputs.as_ptr().add(p * LANES + l);
                let v = _mm512_mask_i32gather_ps::<4>(zero, m, by_position, from.cast());
                _mm512_mask_storeu_ps(plane.as_mut_ptr().add(p), m, v);
            }
        }
    }
}

/// The inner loop's operands: the padded interleaved input, the taps' weight vectors and
/// offsets, the bias and epilogue, and the step between two output positions of a row.
#[cfg(target_arch = "x86_64")]
struct Rows<'a> {
    padded: &'a [f32],
    weights: &'a [f32],
    offsets: &'a [usize],
    bias: std::arch::x86_64::__m512,
    epilogue: Epilogue,
    step: usize,
}

#[cfg(target_arch = "x86_64")]
impl Rows<'_> {
    /// `N` output positions of one row, the first's window at `at` in `padded`, into
    /// `into` (`N` vectors).
    ///
    /// # Safety
    /// The CPU has AVX-512 F, and `at + (N - 1) · step + offset + 16 ≤ padded.len()` for
    /// every offset.
    #[target_feature(enable = "avx512f")]
    unsafe fn group<const N: usize>(&self, at: usize, into: &mut [f32]) {
        use std::arch::x86_64::*;
        let mut acc = [self.bias; N];
        let base = self.padded.as_ptr().wrapping_add(at);
        for (t, &offset) in self.offsets.iter().enumerate() {
            // SAFETY: `weights` holds a vector per tap.
            let w = unsafe { _mm512_loadu_ps(self.weights.as_ptr().add(t * LANES)) };
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: as the caller's promise.
                let x = unsafe { _mm512_loadu_ps(base.add(offset + i * self.step)) };
                *a = _mm512_fmadd_ps(x, w, *a);
            }
        }
        for (i, a) in acc.iter().enumerate() {
            // SAFETY: `into` holds `N` vectors.
            unsafe { _mm512_storeu_ps(into.as_mut_ptr().add(i * LANES), self.epilogue.vector(*a)) };
        }
    }
}
