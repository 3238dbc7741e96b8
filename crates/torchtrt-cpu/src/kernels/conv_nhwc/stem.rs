//! A channels-last convolution of few input channels (a network's stem on its image), with
//! the output channels along the vector lanes: up to [`GROUP`] positions of an output row
//! hold [`VECTORS`] vectors of sums each, and every input value under their windows is
//! broadcast once and multiplied into them with the tap's weight vectors, which the group
//! shares. It writes channels last directly; run channels first, such a layer's wide output
//! is what a network moving to channels last would have to transpose.

use std::ops::Range;

use torchtrt_core::layers::Convolution;
use torchtrt_core::{Kernel, Tensor};

use super::{STEM_CHANNELS, WHAT, epilogue, for_each_unit, windowed};
use crate::kernels::convolution::SendPtr;
use crate::linalg::{Epilogue, Window};
use crate::simd::first_lanes;
use crate::tensor_access::{elems, elems_mut};

/// Lanes of one vector.
const LANES: usize = 16;
/// Output channel vectors of one unit of work.
const VECTORS: usize = 2;
/// Most output positions of a row that share each weight load.
const GROUP: usize = 8;

struct Stem {
    layer: Convolution,
    /// `[kh][kw][c][m]`, each tap's output channels rounded up to whole vectors (zeros past
    /// the last).
    weights: Vec<f32>,
    in_channels: usize,
    out_channels: usize,
    kernel: [usize; 2],
    epilogue: Epilogue,
}

/// The kernel for `layer` (one group) with f32 weights `w` (`[M, C, KH, KW]`).
pub(super) fn prepare(layer: &Convolution, w: &Tensor) -> Result<Box<dyn Kernel>, String> {
    let &[m, c, kh, kw] = w.shape() else {
        return Err(format!("{WHAT}: weights {w} must have rank 4"));
    };
    let src = w.as_slice::<f32>().map_err(|e| e.to_string())?;
    let stride = m.next_multiple_of(LANES);
    let mut weights = vec![0f32; kh * kw * c * stride];
    for (j, filter) in src.chunks_exact(c * kh * kw).enumerate() {
        for (ci, taps) in filter.chunks_exact(kh * kw).enumerate() {
            for (t, &v) in taps.iter().enumerate() {
                weights[(t * c + ci) * stride + j] = v;
            }
        }
    }
    Ok(Box::new(Stem {
        layer: layer.clone(),
        weights,
        in_channels: c,
        out_channels: m,
        kernel: [kh, kw],
        epilogue: epilogue(layer)?,
    }))
}

impl Kernel for Stem {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let (c, m) = (self.in_channels, self.out_channels);
        let (op, win) = windowed(&self.layer, self.kernel, inputs, outputs, c, m)?;
        let [n, oh, ..] = *op.y.shape() else {
            return Err(format!("{WHAT}: the output {} must have rank 4", op.y));
        };
        let run = Run {
            x: elems(op.x)?,
            bias: op.bias,
            residual: op.residual,
            weights: &self.weights,
            in_channels: c,
            out_channels: m,
            win,
            epilogue: self.epilogue,
        };
        let chunks = m.div_ceil(LANES * VECTORS);
        let units = n * oh * chunks;
        let work = op.y.numel() * self.weights.len() / m.next_multiple_of(LANES);
        let out = SendPtr(elems_mut::<f32>(op.y)?.as_mut_ptr());
        for_each_unit(units, work, |unit| {
            let (row, chunk) = (unit / chunks, unit % chunks);
            // SAFETY: `run` checked its slices against the shapes; units write disjoint
            // (row, channel) blocks of the output.
            unsafe { run.row(out, row / oh, row % oh, chunk * LANES * VECTORS) }
        });
        Ok(())
    }
}

/// One call's operands, checked against its shapes.
struct Run<'a> {
    x: &'a [f32],
    bias: Option<&'a [f32]>,
    residual: Option<&'a [f32]>,
    weights: &'a [f32],
    in_channels: usize,
    out_channels: usize,
    win: Window,
    epilogue: Epilogue,
}

impl Run<'_> {
    /// Output row `oh` of image `image`, the [`VECTORS`] channel vectors from `m0`.
    ///
    /// # Safety
    /// `out` holds the output of the shape the window gives; no other task writes this
    /// row's channels from `m0`.
    unsafe fn row(&self, out: SendPtr<f32>, image: usize, oh: usize, m0: usize) {
        let (win, m) = (&self.win, self.out_channels);
        let (out_w, in_h, width, c) = (win.output[2], win.input[1], win.input[2], self.in_channels);
        let row_out = (image * win.output[1] + oh) * out_w;
        let masks = std::array::from_fn(|v| first_lanes(m.saturating_sub(m0 + v * LANES)));
        let image_x = &self.x[image * in_h * width * c..(image + 1) * in_h * width * c];
        let (rows, first_row) = (win.valid_taps(1, oh), win.coord(1, oh, 0));
        let mut ow = 0;
        while ow < out_w {
            let count = GROUP.min(out_w - ow);
            let at = (row_out + ow) * m + m0;
            let args = Args {
                x: image_x,
                w: self.weights.as_ptr().wrapping_add(m0),
                weight_stride: m.next_multiple_of(LANES),
                in_channels: c,
                width,
                rows: rows.clone(),
                first_row,
                row_step: win.dilation[1],
                first_col: win.coord(2, ow, 0),
                col_step: win.dilation[2],
                stride: win.stride[2],
                kernel_width: win.kernel[2],
                bias: self.bias.map(|b| b.as_ptr().wrapping_add(m0)),
                residual: self.residual.map(|r| r.as_ptr().wrapping_add(at)),
                out: out.get().wrapping_add(at),
                out_stride: m,
                masks,
                epilogue: self.epilogue,
            };
            // SAFETY: `rows` are the kernel rows inside the image and columns outside it
            // are not read; the masks keep the weights, bias, residual and output inside
            // the channels; the caller owns the output block.
            unsafe { dispatch(count, &args) }
            ow += count;
        }
    }
}

/// [`VECTORS`] output channel vectors of consecutive output positions of a row.
struct Args<'a> {
    /// The image, `[H, W, C]`.
    x: &'a [f32],
    /// The first tap's weights of the first output channel; `(tap, c)` steps
    /// `weight_stride` apart.
    w: *const f32,
    weight_stride: usize,
    in_channels: usize,
    width: usize,
    /// Kernel rows inside the image, the input row of kernel row 0 (may be negative) and
    /// the rows between kernel rows.
    rows: Range<usize>,
    first_row: isize,
    row_step: usize,
    /// The input column of the first position's kernel column 0 (may be negative), the
    /// columns between kernel columns and between positions.
    first_col: isize,
    col_step: usize,
    stride: usize,
    kernel_width: usize,
    bias: Option<*const f32>,
    /// The residual and the output of the first position, positions `out_stride` apart.
    residual: Option<*const f32>,
    out: *mut f32,
    out_stride: usize,
    /// Valid lanes of each vector.
    masks: [u16; VECTORS],
    epilogue: Epilogue,
}

/// Runs [`positions`] for `count` (1 to [`GROUP`]) positions.
///
/// # Safety
/// As [`positions`].
unsafe fn dispatch(count: usize, a: &Args) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller.
    unsafe {
        match count {
            1 => positions::<1>(a),
            2 => positions::<2>(a),
            3 => positions::<3>(a),
            4 => positions::<4>(a),
            5 => positions::<5>(a),
            6 => positions::<6>(a),
            7 => positions::<7>(a),
            _ => positions::<GROUP>(a),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (count, a);
}

/// `G` consecutive output positions of one row over every tap: each input value under a
/// position's window broadcast and multiplied by the tap's weight vectors; values in the
/// padding count as zeros.
///
/// # Safety
/// The CPU has AVX-512F; `a.rows` lie inside the image; at most [`STEM_CHANNELS`]
/// input channels; the weights, bias, residual and output hold the masked lanes of each
/// vector of each position.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn positions<const G: usize>(a: &Args) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the contract keeps every unmasked address inside its buffer;
    // a tap points at its `c` values inside the input row or at `c` zeros.
    unsafe {
        let bias: [__m512; VECTORS] = std::array::from_fn(|v| match a.bias {
            Some(p) => _mm512_maskz_loadu_ps(a.masks[v], p.add(v * LANES)),
            None => _mm512_setzero_ps(),
        });
        let mut acc = [bias; G];
        let c = a.in_channels;
        let zeros = [0f32; STEM_CHANNELS];
        for kh in a.rows.clone() {
            let ih = (a.first_row + (kh * a.row_step) as isize) as usize;
            let line = &a.x[ih * a.width * c..(ih + 1) * a.width * c];
            for kw in 0..a.kernel_width {
                let taps: [*const f32; G] = std::array::from_fn(|j| {
                    let col = a.first_col + (j * a.stride + kw * a.col_step) as isize;
                    match usize::try_from(col).ok().filter(|&iw| iw < a.width) {
                        Some(iw) => line[iw * c..].as_ptr(),
                        None => zeros.as_ptr(),
                    }
                });
                let w = a.w.add((kh * a.kernel_width + kw) * c * a.weight_stride);
                for ci in 0..c {
                    let tap_w = w.add(ci * a.weight_stride);
                    let mut weight = [_mm512_setzero_ps(); VECTORS];
                    for (v, w) in weight.iter_mut().enumerate() {
                        *w = _mm512_maskz_loadu_ps(a.masks[v], tap_w.add(v * LANES));
                    }
                    for (sums, tap) in acc.iter_mut().zip(&taps) {
                        let x = _mm512_set1_ps(*tap.add(ci));
                        for (sum, w) in sums.iter_mut().zip(&weight) {
                            *sum = _mm512_fmadd_ps(x, *w, *sum);
                        }
                    }
                }
            }
        }
        for (j, sums) in acc.iter().enumerate() {
            for (v, &sum) in sums.iter().enumerate() {
                let (mask, at) = (a.masks[v], j * a.out_stride + v * LANES);
                let mut y = sum;
                if let Some(r) = a.residual {
                    y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, r.add(at)));
                }
                _mm512_mask_storeu_ps(a.out.add(at), mask, a.epilogue.vector(y));
            }
        }
    }
}
