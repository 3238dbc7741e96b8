//! A channels-last depthwise convolution with the channels along the vector lanes: each
//! output position's sixteen channels sum their taps in one register, and up to [`GROUP`]
//! positions of a row share each tap's weight load. Positions whose window reaches into
//! the padding read the taps there as zeros through an empty load mask, so a row's
//! border shares the loads too (a 7-wide row with 5×5 taps has four such positions).
//! Nothing is gathered or padded: a position's channels are already one vector. Where the
//! window moves by one column with no dilation and has 3, 5 or 7 columns, the positions of
//! a group load each of their input columns once for every tap that reads it
//! ([`reused_columns`]): 10 loads instead of 24 per kernel row of 3×3 taps for 8 positions.

use std::ops::Range;

use torchtrt_core::layers::Convolution;
use torchtrt_core::{Kernel, Tensor};

use super::{WHAT, epilogue, for_each_unit, windowed};
use crate::kernels::convolution::SendPtr;
use crate::linalg::{Epilogue, Window};
use crate::simd::first_lanes;
use crate::tensor_access::{elems, elems_mut};

/// Lanes of one vector.
const LANES: usize = 16;
/// Most output positions of a row that share each weight load.
const GROUP: usize = 8;
/// Channel vectors of one unit of work (with one output row).
const UNIT_VECTORS: usize = 4;

struct Depthwise {
    layer: Convolution,
    /// `[kh][kw][c]`, each tap's channels rounded up to whole vectors (zeros past the last).
    weights: Vec<f32>,
    channels: usize,
    kernel: [usize; 2],
    epilogue: Epilogue,
}

/// The kernel for depthwise `layer` with f32 weights `w` (`[C, 1, KH, KW]`).
pub(super) fn prepare(layer: &Convolution, w: &Tensor) -> Result<Box<dyn Kernel>, String> {
    let &[channels, _, kh, kw] = w.shape() else {
        return Err(format!("{WHAT}: depthwise weights {w} must have rank 4"));
    };
    let (taps, stride) = (kh * kw, channels.next_multiple_of(LANES));
    let src = w.as_slice::<f32>().map_err(|e| e.to_string())?;
    let mut weights = vec![0f32; taps * stride];
    for (c, filter) in src.chunks_exact(taps).enumerate() {
        for (t, &v) in filter.iter().enumerate() {
            weights[t * stride + c] = v;
        }
    }
    Ok(Box::new(Depthwise {
        layer: layer.clone(),
        weights,
        channels,
        kernel: [kh, kw],
        epilogue: epilogue(layer)?,
    }))
}

impl Kernel for Depthwise {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let c = self.channels;
        let (op, win) = windowed(&self.layer, self.kernel, inputs, outputs, c, c)?;
        let [n, oh, ..] = *op.y.shape() else {
            return Err(format!("{WHAT}: the output {} must have rank 4", op.y));
        };
        let run = Run {
            x: elems(op.x)?,
            bias: op.bias,
            residual: op.residual,
            weights: &self.weights,
            channels: c,
            interior: interior(&win),
            win,
            epilogue: self.epilogue,
        };
        let vectors = c.div_ceil(LANES);
        let chunks = vectors.div_ceil(UNIT_VECTORS);
        let units = n * oh * chunks;
        let work = op.y.numel() * self.kernel[0] * self.kernel[1];
        let out = SendPtr(elems_mut::<f32>(op.y)?.as_mut_ptr());
        for_each_unit(units, work, |unit| {
            let (row, chunk) = (unit / chunks, unit % chunks);
            let v0 = chunk * UNIT_VECTORS;
            // SAFETY: `run` checked its slices against the shapes; units write disjoint
            // (row, channel) blocks of the output.
            unsafe {
                run.row(
                    out,
                    row / oh,
                    row % oh,
                    v0..(v0 + UNIT_VECTORS).min(vectors),
                )
            }
        });
        Ok(())
    }
}

/// The output columns whose every tap lies inside the input row: the first run of them.
fn interior(win: &Window) -> Range<usize> {
    let full = |o: usize| win.valid_taps(2, o).len() == win.kernel[2];
    let columns = win.output[2];
    let lo = (0..columns).find(|&o| full(o)).unwrap_or(columns);
    let hi = (lo..columns).find(|&o| !full(o)).unwrap_or(columns);
    lo..hi
}

/// One call's operands, checked against its shapes.
struct Run<'a> {
    x: &'a [f32],
    bias: Option<&'a [f32]>,
    residual: Option<&'a [f32]>,
    weights: &'a [f32],
    channels: usize,
    win: Window,
    interior: Range<usize>,
    epilogue: Epilogue,
}

impl Run<'_> {
    /// Output row `oh` of image `image`, channel vectors `vectors`.
    ///
    /// # Safety
    /// `out` holds the output of the shape the window gives; no other task writes this
    /// row's channels of `vectors`.
    unsafe fn row(&self, out: SendPtr<f32>, image: usize, oh: usize, vectors: Range<usize>) {
        let (win, c) = (&self.win, self.channels);
        let (out_w, in_h, width) = (win.output[2], win.input[1], win.input[2]);
        let row_out = (image * win.output[1] + oh) * out_w;
        let image_x = self.x.as_ptr().wrapping_add(image * in_h * width * c);
        let (rows, first_row) = (win.valid_taps(1, oh), win.coord(1, oh, 0));
        let mut ow = 0;
        while ow < out_w {
            let (count, checked) = if self.interior.contains(&ow) {
                (GROUP.min(self.interior.end - ow), false)
            } else {
                let end = if ow < self.interior.start {
                    self.interior.start
                } else {
                    out_w
                };
                (GROUP.min(end - ow), true)
            };
            for v in vectors.clone() {
                let c0 = v * LANES;
                let at = (row_out + ow) * c + c0;
                let args = Args {
                    x: image_x.wrapping_add(c0),
                    w: self.weights.as_ptr().wrapping_add(c0),
                    weight_stride: c.next_multiple_of(LANES),
                    channels: c,
                    row_len: width * c,
                    width,
                    rows: rows.clone(),
                    first_row,
                    row_step: win.dilation[1],
                    first_col: win.coord(2, ow, 0),
                    col_step: win.dilation[2],
                    stride: win.stride[2],
                    kernel_width: win.kernel[2],
                    bias: self.bias.map(|b| b.as_ptr().wrapping_add(c0)),
                    residual: self.residual.map(|r| r.as_ptr().wrapping_add(at)),
                    out: out.get().wrapping_add(at),
                    mask: first_lanes(c - c0),
                    epilogue: self.epilogue,
                };
                // SAFETY: `rows` are the kernel rows inside the image; the interior run's
                // positions read every kernel column inside it, and the others mask the
                // columns outside; the caller owns the output block.
                unsafe { dispatch(count, checked, &args) }
            }
            ow += count;
        }
    }
}

/// One channel vector of consecutive output positions of a row.
struct Args {
    /// The image's first position, at the vector's first channel.
    x: *const f32,
    /// The first tap's weights of the vector's channels; taps `weight_stride` apart.
    w: *const f32,
    weight_stride: usize,
    /// Channels: the distance between positions.
    channels: usize,
    /// Elements of one input row.
    row_len: usize,
    /// Kernel rows inside the image, and the input row of kernel row 0 (may be negative)
    /// and the rows between kernel rows.
    rows: Range<usize>,
    first_row: isize,
    row_step: usize,
    /// Input columns; the input column of the first position's kernel column 0 (may be
    /// negative), the columns between kernel columns and between positions.
    width: usize,
    first_col: isize,
    col_step: usize,
    stride: usize,
    kernel_width: usize,
    bias: Option<*const f32>,
    /// The residual and the output of the first position, positions `channels` apart.
    residual: Option<*const f32>,
    out: *mut f32,
    /// Valid lanes of the vector.
    mask: u16,
    epilogue: Epilogue,
}

/// Runs [`positions`] for `count` (1 to [`GROUP`]) positions, `checked` or not.
///
/// # Safety
/// As [`positions`].
unsafe fn dispatch(count: usize, checked: bool, a: &Args) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller.
    unsafe {
        if a.stride == 1 && a.col_step == 1 && matches!(a.kernel_width, 3 | 5 | 7) {
            macro_rules! by_width {
                ($g:expr, $checked:literal) => {
                    match a.kernel_width {
                        3 => reused_columns::<$g, 3, $checked>(a),
                        5 => reused_columns::<$g, 5, $checked>(a),
                        _ => reused_columns::<$g, 7, $checked>(a),
                    }
                };
            }
            macro_rules! by_group {
                ($checked:literal) => {
                    match count {
                        1 => by_width!(1, $checked),
                        2 => by_width!(2, $checked),
                        3 => by_width!(3, $checked),
                        4 => by_width!(4, $checked),
                        5 => by_width!(5, $checked),
                        6 => by_width!(6, $checked),
                        7 => by_width!(7, $checked),
                        _ => by_width!(GROUP, $checked),
                    }
                };
            }
            return if checked {
                by_group!(true)
            } else {
                by_group!(false)
            };
        }
        macro_rules! by_count {
            ($checked:literal) => {
                match count {
                    1 => positions::<1, $checked>(a),
                    2 => positions::<2, $checked>(a),
                    3 => positions::<3, $checked>(a),
                    4 => positions::<4, $checked>(a),
                    5 => positions::<5, $checked>(a),
                    6 => positions::<6, $checked>(a),
                    7 => positions::<7, $checked>(a),
                    _ => positions::<GROUP, $checked>(a),
                }
            };
        }
        if checked {
            by_count!(true)
        } else {
            by_count!(false)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (count, checked, a);
}

/// `G` consecutive output positions of one channel vector over the kernel rows `a.rows`
/// and every kernel column; with `CHECKED`, a tap outside the input row loads zeros
/// through an empty mask.
///
/// # Safety
/// The CPU has AVX-512F; every tap of `a.rows` (and, unless `CHECKED`, of every kernel
/// column) of the `G` positions reads inside the image; the bias, residual and output hold
/// the masked lanes of each position.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn positions<const G: usize, const CHECKED: bool>(a: &Args) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the contract keeps every unmasked address inside its buffer;
    // masked-off lanes are not read, and their addresses are formed by wrapping arithmetic.
    unsafe {
        let bias = match a.bias {
            Some(p) => _mm512_maskz_loadu_ps(a.mask, p),
            None => _mm512_setzero_ps(),
        };
        let mut acc = [bias; G];
        let step = (a.stride * a.channels) as isize;
        let c = a.channels as isize;
        for kh in a.rows.clone() {
            let ih = (a.first_row + (kh * a.row_step) as isize) as usize;
            let row = a.x.wrapping_add(ih * a.row_len);
            for kw in 0..a.kernel_width {
                let w = a.w.add((kh * a.kernel_width + kw) * a.weight_stride);
                let weight = _mm512_loadu_ps(w);
                let iw = a.first_col + (kw * a.col_step) as isize;
                let p = row.wrapping_offset(iw * c);
                for (j, sum) in acc.iter_mut().enumerate() {
                    let mask = if CHECKED {
                        let col = iw + j as isize * a.stride as isize;
                        if (0..a.width as isize).contains(&col) {
                            a.mask
                        } else {
                            0
                        }
                    } else {
                        a.mask
                    };
                    let x = _mm512_maskz_loadu_ps(mask, p.wrapping_offset(j as isize * step));
                    *sum = _mm512_fmadd_ps(x, weight, *sum);
                }
            }
        }
        for (j, &sum) in acc.iter().enumerate() {
            let mut y = sum;
            if let Some(r) = a.residual {
                y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(a.mask, r.add(j * a.channels)));
            }
            _mm512_mask_storeu_ps(a.out.add(j * a.channels), a.mask, a.epilogue.vector(y));
        }
    }
}

/// [`positions`] of `G` positions with unit stride and dilation and `KW` kernel columns:
/// each input column under the group is loaded once per kernel row (as zeros outside the
/// input row, with `CHECKED`) and multiplied into every position whose window covers it.
///
/// # Safety
/// As [`positions`], with `a.kernel_width == KW`, `a.stride == 1` and `a.col_step == 1`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn reused_columns<const G: usize, const KW: usize, const CHECKED: bool>(a: &Args) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the contract keeps every unmasked address inside its buffer;
    // masked-off lanes are not read, and their addresses are formed by wrapping arithmetic.
    unsafe {
        let bias = match a.bias {
            Some(p) => _mm512_maskz_loadu_ps(a.mask, p),
            None => _mm512_setzero_ps(),
        };
        let mut acc = [bias; G];
        let c = a.channels;
        for kh in a.rows.clone() {
            let ih = (a.first_row + (kh * a.row_step) as isize) as usize;
            let p =
                a.x.wrapping_add(ih * a.row_len)
                    .wrapping_offset(a.first_col * c as isize);
            let mut w = [bias; KW];
            for (kw, weight) in w.iter_mut().enumerate() {
                *weight = _mm512_loadu_ps(a.w.add((kh * KW + kw) * a.weight_stride));
            }
            for col in 0..G + KW - 1 {
                let inside = (0..a.width as isize).contains(&(a.first_col + col as isize));
                let mask = if !CHECKED || inside { a.mask } else { 0 };
                let x = _mm512_maskz_loadu_ps(mask, p.wrapping_add(col * c));
                for (kw, weight) in w.iter().enumerate() {
                    if let Some(sum) = col.checked_sub(kw).and_then(|j| acc.get_mut(j)) {
                        *sum = _mm512_fmadd_ps(x, *weight, *sum);
                    }
                }
            }
        }
        for (j, &sum) in acc.iter().enumerate() {
            let mut y = sum;
            if let Some(r) = a.residual {
                y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(a.mask, r.add(j * a.channels)));
            }
            _mm512_mask_storeu_ps(a.out.add(j * a.channels), a.mask, a.epilogue.vector(y));
        }
    }
}
