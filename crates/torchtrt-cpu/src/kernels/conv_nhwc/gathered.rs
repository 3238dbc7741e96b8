//! A channels-last convolution of few input channels (a network's stem on its image): each
//! output position's window, `KH·KW·C` values, gathered into a row, and the rows times the
//! weights packed once as the constant right operand of [`PackedRhs`], with the bias,
//! residual and activation applied as each register tile is stored. The product's rows are
//! the output's positions, so it writes channels last directly; run channels first, such a
//! layer's wide output is what a network moving to channels last would have to transpose.

use rayon::prelude::*;
use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Kernel, Tensor};

use super::{Operands, WHAT, epilogue};
use crate::linalg::{Epilogue, Finish, PackedRhs, Window, WindowParams};
use crate::scratch::with_scratch;
use crate::tensor_access::{elems, elems_mut};

/// Output positions gathered and multiplied by one task.
const BLOCK: usize = 128;

struct Gathered {
    layer: Convolution,
    /// `(kh, kw, c) × M`: the depth in the order a gathered row holds its window.
    weights: PackedRhs,
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
    let depth = kh * kw * c;
    let mut reordered = vec![0f32; depth * m];
    for (j, filter) in src.chunks_exact(c * kh * kw).enumerate() {
        for (ci, taps) in filter.chunks_exact(kh * kw).enumerate() {
            for (t, &v) in taps.iter().enumerate() {
                reordered[(t * c + ci) * m + j] = v;
            }
        }
    }
    let weights = PackedRhs::new(&reordered, depth, m, m, 1)
        .ok_or_else(|| format!("{WHAT}: weights {w} do not pack"))?;
    Ok(Box::new(Gathered {
        layer: layer.clone(),
        weights,
        in_channels: c,
        out_channels: m,
        kernel: [kh, kw],
        epilogue: epilogue(layer)?,
    }))
}

impl Gathered {
    /// The window over an input of `h × w` positions.
    fn window(&self, h: usize, w: usize) -> Result<Window, String> {
        let kernel = self.kernel.map(|k| k as i64);
        let params = WindowParams {
            kernel: &kernel,
            strides: &self.layer.strides,
            dilations: &self.layer.dilations,
            pads_begin: &self.layer.pads_begin,
            pads_end: &self.layer.pads_end,
            ceil_mode: false,
        };
        Window::new(&[h, w], &params).map_err(|e| format!("{WHAT}: {e}"))
    }
}

impl Kernel for Gathered {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let (c, m) = (self.in_channels, self.out_channels);
        let mut window = None;
        let op = Operands::new(inputs, outputs, m, |x| {
            let &[n, h, w, xc] = x.shape() else {
                return Err(format!("{WHAT}: x {x} must be [N, H, W, C]"));
            };
            if xc != c || x.dtype() != DType::F32 {
                return Err(format!("{WHAT}: x {x} must be f32 with {c} channels last"));
            }
            let win = self.window(h, w)?;
            let shape = vec![n, win.output[1], win.output[2], m];
            window = Some(win);
            Ok(shape)
        })?;
        let win = window.ok_or(WHAT)?;
        let x = elems::<f32>(op.x)?;
        let positions = op.y.numel() / m.max(1);
        let depth = self.weights.depth();
        let (bias, residual) = (op.bias, op.residual);
        let out = elems_mut::<f32>(op.y)?;
        let task = |(b, out): (usize, &mut [f32])| {
            let first = b * BLOCK;
            let rows = out.len() / m;
            with_scratch(rows * depth, |rowbuf: &mut [f32]| {
                gather(x, &win, c, first, rowbuf);
                let finish = Finish {
                    bias,
                    residual: residual.map(|res| &res[first * m..(first + rows) * m]),
                    epilogue: self.epilogue,
                };
                self.weights.product(rowbuf, depth, rows, finish, out, 1)
            })
        };
        if positions > BLOCK {
            out.par_chunks_mut(BLOCK * m).enumerate().try_for_each(task)
        } else {
            out.chunks_mut(BLOCK * m).enumerate().try_for_each(task)
        }
    }
}

/// Writes the windows of the output positions from `first` on (counted over the images'
/// rows), one per row of `rows`: `(kh, kw, c)` in order, zeros in the padding. Runs of
/// positions along one output row go kernel row by kernel row, the positions whose taps
/// all lie inside the input (without dilation) copying each kernel row's taps as one run.
fn gather(x: &[f32], win: &Window, c: usize, first: usize, rows: &mut [f32]) {
    let [_, out_h, out_w] = win.output;
    let [_, in_h, in_w] = win.input;
    let [_, kh, kw] = win.kernel;
    let (depth, span) = (kh * kw * c, kw * c);
    let plane = in_h * in_w * c;
    let interior = if win.dilation[2] == 1 {
        let lo = (0..out_w)
            .find(|&o| win.coord(2, o, 0) >= 0)
            .unwrap_or(out_w);
        let hi = (lo..out_w)
            .find(|&o| win.coord(2, o, kw - 1) >= in_w as isize)
            .unwrap_or(out_w);
        lo..hi
    } else {
        0..0
    };
    let mut p = first;
    let mut done = 0;
    let count = rows.len() / depth;
    while done < count {
        let (image, oh, ow0) = (p / (out_h * out_w), p / out_w % out_h, p % out_w);
        let len = (out_w - ow0).min(count - done);
        let image_x = &x[image * plane..(image + 1) * plane];
        let block = &mut rows[done * depth..(done + len) * depth];
        for i in 0..kh {
            let ih = win.tap(1, oh, i);
            for (k, row) in block.chunks_exact_mut(depth).enumerate() {
                let taps = &mut row[i * span..(i + 1) * span];
                let ow = ow0 + k;
                let Some(ih) = ih else {
                    taps.fill(0.0);
                    continue;
                };
                let line = &image_x[ih * in_w * c..(ih + 1) * in_w * c];
                if interior.contains(&ow) {
                    let at = win.coord(2, ow, 0) as usize * c;
                    copy_short(taps, &line[at..at + span]);
                    continue;
                }
                let cols = win.valid_taps(2, ow);
                taps[..cols.start * c].fill(0.0);
                taps[cols.end.max(cols.start) * c..].fill(0.0);
                for j in cols {
                    let iw = win.coord(2, ow, j) as usize;
                    taps[j * c..(j + 1) * c].copy_from_slice(&line[iw * c..(iw + 1) * c]);
                }
            }
        }
        done += len;
        p += len;
    }
}

/// `dst = src` for the few elements of a window's row, four at a time rather than through
/// a library call per row.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let (d4, d) = dst.as_chunks_mut::<4>();
    let (s4, s) = src.as_chunks::<4>();
    for (d, s) in d4.iter_mut().zip(s4) {
        *d = *s;
    }
    for (d, s) in d.iter_mut().zip(s) {
        *d = *s;
    }
}
