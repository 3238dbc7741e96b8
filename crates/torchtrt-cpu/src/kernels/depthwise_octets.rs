//! Depthwise 2-D convolution of f32 planes with eight channels along the vector lanes, on
//! AVX2 and FMA: [`super::depthwise_lanes`]'s blocking for CPUs without AVX-512, each
//! position's eight channels one 256-bit vector. A block of
//! eight channels is interleaved into a zero-padded buffer, each output position
//! accumulates its channels tap by tap (up to eight positions of a row sharing each tap's
//! weights), the fused activation runs over the block's outputs at once, and they are
//! de-interleaved back into the channels' planes.

use super::convolution::ConvGeom;
use super::depthwise_lanes::{PaddedPlane, groups, row_groups};
use crate::linalg::Epilogue;

/// Channels per block: the lanes of one AVX2 vector of f32.
pub(super) const LANES: usize = 8;

/// One position's values for the block's channels.
type Lanes = [f32; LANES];

/// A block's buffers: the padded, channel-interleaved input (its padding zeroed once: a
/// task's blocks share one geometry), the interleaved outputs and the taps' weights.
#[derive(Default)]
pub(super) struct Scratch {
    padded: Vec<Lanes>,
    outputs: Vec<Lanes>,
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
/// the bias, and the step between two output positions of a row.
struct Rows<'a> {
    padded: &'a [Lanes],
    weights: &'a [Lanes],
    offsets: &'a [usize],
    bias: Lanes,
    step: usize,
}

#[cfg(target_arch = "x86_64")]
impl Rows<'_> {
    /// `N` output positions of one row, the first's window at `at` in `padded`, into
    /// `into` (`N` positions).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA, and `at + (N - 1) · step + offset < padded.len()` for
    /// every offset.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn group<const N: usize>(&self, at: usize, into: &mut [Lanes]) {
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
        for (o, a) in into.iter_mut().zip(acc) {
            // SAFETY: `o` is one vector.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), a) };
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
    let Scratch {
        padded,
        outputs,
        weights,
    } = scratch;
    if padded.len() != height * width {
        padded.clear();
        padded.resize(height * width, [0.0; LANES]);
    }
    outputs.resize(plane_out, [0.0; LANES]);
    weights.clear();
    weights.resize(taps, [0.0; LANES]);
    let mut b = [0.0; LANES];
    for l in 0..lanes {
        let c = first + l;
        let plane = &image[c * plane_in..(c + 1) * plane_in];
        for (y, src) in plane.chunks_exact(iw).enumerate() {
            let at = (y + pt) * width + pl;
            for (p, &v) in padded[at..at + iw].iter_mut().zip(src) {
                p[l] = v;
            }
        }
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
    };
    for (at, first, n) in row_groups([oh, ow], [sh, sw], width) {
        let into = &mut outputs[first..first + n];
        // SAFETY: the `n` positions from output `first` read their windows inside `padded`
        // (its sides cover every window).
        unsafe { groups!(rows, n, at, into) };
    }
    epilogue.apply(outputs.as_flattened_mut());
    for (l, plane) in dst.chunks_exact_mut(plane_out).enumerate() {
        for (d, o) in plane.iter_mut().zip(outputs.iter()) {
            *d = o[l];
        }
    }
}
