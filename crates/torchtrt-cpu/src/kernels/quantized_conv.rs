//! Convolution of 8-bit integers ([`QuantizedConvolution`]). The input's channels are first
//! interleaved four to a 32-bit word (`[C/4, H, W]` words, unsigned bytes), the layout the
//! integer tiles read a group of four depths from; im2col then works on words, and its rows
//! are the tiles' operand as they stand (a pointwise layer reads the interleaved input
//! itself). The weights are packed once in the matching depth order, `(c/4, taps, c%4)`.
//! Each tile's 32-bit sums are scaled to f32 with the bias, residual and activation, and
//! written (or quantized) as they leave.

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;
use torchtrt_core::layers::{QuantizedConvolution, quantized_range};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::convolution::{ConvGeom, SendPtr};
use super::quantize::quantize_into;
use crate::linalg::gemm_i8::{self, Acc, MR, NR, PackedRows, interleave_rows};
use crate::linalg::{Epilogue, im2col};
use crate::scratch::{Kept, with_scratch};
use crate::simd::multiversion;
use crate::tensor_access::{check_arity, check_output, elems, elems_mut, words, words_mut};

const WHAT: &str = "QuantizedConvolution";

/// Bytes of unfolded input one task aims for: they stay in L2 while every row block reads
/// them.
const PANEL_BYTES: usize = 256 * 1024;

struct QuantizedConvKernel {
    layer: QuantizedConvolution,
    epilogue: Epilogue,
    /// The constant weights packed per group.
    packed: Option<Arc<Vec<PackedRows>>>,
}

pub(super) fn prepare(
    layer: &QuantizedConvolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    if layer.dtype != DType::F32 {
        return Err(format!(
            "{WHAT} has no CPU kernel for {} outputs",
            layer.dtype
        ));
    }
    if layer.conv.channels_last {
        let mut plain = layer.clone();
        plain.conv.channels_last = false;
        return super::conv_nhwc::channels_first_around(WHAT, inputs, |moved| {
            prepare(&plain, moved)
        });
    }
    let epilogue = Epilogue::of(layer.conv.activation)
        .ok_or_else(|| format!("{WHAT}: cannot fuse {:?}", layer.conv.activation))?;
    let packed = match inputs[1].value {
        Some(w) => Some(Arc::new(pack(layer, w)?)),
        None => None,
    };
    Ok(Box::new(QuantizedConvKernel {
        layer: layer.clone(),
        epilogue,
        packed,
    }))
}

/// The `I8` weights `[M, C/groups, k…]` packed per group, their depth in the order the
/// interleaved input unfolds: channel quad, tap, channel within the quad (channels past
/// `C/groups` are zero).
fn pack(layer: &QuantizedConvolution, w: &Tensor) -> Result<Vec<PackedRows>, String> {
    let groups = usize::try_from(layer.conv.groups)
        .ok()
        .filter(|&g| g > 0)
        .ok_or_else(|| format!("{WHAT}: groups {} must be positive", layer.conv.groups))?;
    let values = words::<i8>(w)?;
    let (&m, rest) = w.shape().split_first().ok_or(WHAT)?;
    let depth: usize = rest.iter().product();
    if m % groups != 0 {
        return Err(format!(
            "{WHAT}: {groups} groups do not divide {m} output channels"
        ));
    }
    let rows = m / groups;
    let channels = rest.first().copied().unwrap_or(1);
    let taps = depth / channels.max(1);
    let quads = channels.div_ceil(4);
    let ordered = quads * taps * 4;
    values
        .chunks(rows * depth.max(1))
        .take(groups)
        .map(|g| {
            let mut reordered = vec![0i8; rows * ordered];
            for (dst, src) in reordered
                .chunks_exact_mut(ordered)
                .zip(g.chunks(depth.max(1)))
            {
                for (i, &v) in src.iter().enumerate() {
                    let (c, t) = (i / taps.max(1), i % taps.max(1));
                    dst[((c / 4) * taps + t) * 4 + c % 4] = v;
                }
            }
            PackedRows::new(&reordered, rows, ordered).ok_or_else(|| {
                format!(
                    "{WHAT}: {depth} products per output exceed the {} a 32-bit sum holds",
                    gemm_i8::MAX_DEPTH
                )
            })
        })
        .collect()
}

impl Kernel for QuantizedConvKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=4, 1)?;
        let (x, w) = (inputs[0], inputs[1]);
        let flip = match x.dtype() {
            DType::I8 => 0x80,
            DType::U8 => 0,
            other => return Err(format!("{WHAT} reads I8 or U8, not {other}")),
        };
        let geom = ConvGeom::new(&self.layer.conv, x.shape(), w.shape())?;
        let out = &mut outputs[0];
        let out_dtype = self.layer.output.map_or(DType::F32, |q| q.dtype);
        check_output(WHAT, out, out_dtype, &geom.output_shape(x.rank() - 2))?;
        let m = geom.out_channels;
        if self.layer.weight_scales.len() != m {
            return Err(format!(
                "{WHAT}: {} weight scales for {m} channels",
                self.layer.weight_scales.len()
            ));
        }
        let bias = inputs.get(2).map(|b| elems::<f32>(b)).transpose()?;
        if bias.is_some_and(|b| b.len() != m) {
            return Err(format!("{WHAT}: the bias must hold {m} values"));
        }
        let residual = inputs.get(3).map(|r| elems::<f32>(r)).transpose()?;
        if let Some(r) = inputs.get(3)
            && r.shape() != out.shape()
        {
            return Err(format!("{WHAT}: residual {r} does not match output {out}"));
        }
        let fresh;
        let packed = match &self.packed {
            Some(p) => p.as_slice(),
            None => {
                fresh = pack(&self.layer, w)?;
                fresh.as_slice()
            }
        };
        let zero = self.layer.input_zero_point as u8;
        let run = Run {
            geom: &geom,
            x: words::<u8>(x)?,
            packed,
            flip,
            pad: zero ^ flip,
            scales: self
                .layer
                .weight_scales
                .iter()
                .map(|s| s * self.layer.input_scale)
                .collect(),
            bias,
            residual,
            epilogue: self.epilogue,
        };
        let len = out.numel();
        let dst = match self.layer.output {
            None => Dst::Float(SendPtr(elems_mut::<f32>(out)?.as_mut_ptr())),
            Some(q) => Dst::Quantized {
                ptr: SendPtr(words_mut::<u8>(out)?.as_mut_ptr()),
                scale: q.scale,
                zero_point: q.zero_point,
                range: quantized_range(q.dtype).ok_or(WHAT)?,
            },
        };
        run.all(dst, len)
    }
}

/// Where a call's outputs go, and in what form.
#[derive(Clone, Copy)]
enum Dst {
    /// f32 values.
    Float(SendPtr<f32>),
    /// Bytes of the values quantized (the layer's [`torchtrt_core::layers::OutputQuantization`]).
    Quantized {
        ptr: SendPtr<u8>,
        scale: f32,
        zero_point: i32,
        range: (i32, i32),
    },
}

/// One call's operands.
struct Run<'a> {
    geom: &'a ConvGeom,
    x: &'a [u8],
    packed: &'a [PackedRows],
    /// XORed into input bytes: 0x80 for `I8` (to `u8` offset by 128), else 0.
    flip: u8,
    /// The zero point as packed (after `flip`).
    pad: u8,
    /// `input_scale · weight_scales[m]`.
    scales: Vec<f32>,
    bias: Option<&'a [f32]>,
    residual: Option<&'a [f32]>,
    epilogue: Epilogue,
}

/// Words of slack after an operand, so a tile may read a whole panel past its last column.
const SLACK: usize = NR;

impl Run<'_> {
    /// Interleaves the input and runs every task: (image, group, column tile, row tile).
    fn all(&self, dst: Dst, len: usize) -> Result<(), String> {
        let geom = self.geom;
        let win = &geom.window;
        let groups = geom.groups;
        let (cg, mg) = (geom.channels / groups, geom.out_channels / groups);
        let (plane, outputs) = (win.input_len(), win.output_len());
        if len != geom.batch * geom.out_channels * outputs {
            return Err(format!("{WHAT}: the output has {len} elements"));
        }
        if mg * outputs == 0 {
            return Ok(());
        }
        let cg4 = cg.div_ceil(4);
        let mut words = Kept::<Vec<u32>>::shared("interleaved input");
        words.clear();
        words.resize(geom.batch * groups * cg4 * plane + SLACK, 0);
        self.interleave(
            &mut words[..geom.batch * groups * cg4 * plane],
            cg,
            cg4,
            plane,
        );
        let words = &words[..];
        let quads = self.packed[0].quads();
        let width = (PANEL_BYTES / (quads * 4 * NR).max(1) * NR)
            .max(NR)
            .min(outputs.next_multiple_of(NR));
        let col_tiles = outputs.div_ceil(width);
        let threads = rayon::current_num_threads();
        let mut row_tiles = 1;
        while geom.batch * groups * col_tiles * row_tiles < 2 * threads && mg >= 4 * MR * row_tiles
        {
            row_tiles *= 2;
        }
        let height = mg.div_ceil(row_tiles).next_multiple_of(MR);
        let per = col_tiles * row_tiles;
        let tasks = geom.batch * groups * per;
        let pad_word = u32::from_ne_bytes([self.pad; 4]);
        let task = |t: usize| {
            let (image_group, rest) = (t / per, t % per);
            let (j0, m0) = ((rest / row_tiles) * width, (rest % row_tiles) * height);
            let n = width.min(outputs - j0);
            let rows = m0..(m0 + height).min(mg);
            if rows.is_empty() {
                return;
            }
            let start = image_group * cg4 * plane;
            let first = (image_group * mg) * outputs + j0;
            let group = image_group % groups;
            if win.is_pointwise() {
                let b = bytemuck::cast_slice(&words[start + j0..]);
                self.tiles(group, rows, (b, plane * 4), n, first, dst);
                return;
            }
            let xg = &words[start..start + cg4 * plane];
            with_scratch(cg4 * win.kernel_len() * n + SLACK, |col: &mut [u32]| {
                let unfolded = cg4 * win.kernel_len() * n;
                im2col(xg, cg4, win, pad_word, j0..j0 + n, &mut col[..unfolded]);
                let b = bytemuck::cast_slice(&col[..]);
                self.tiles(group, rows, (b, n * 4), n, first, dst);
            });
        };
        if tasks > 1 && threads > 1 {
            (0..tasks).into_par_iter().for_each(task);
        } else {
            (0..tasks).for_each(task);
        }
        Ok(())
    }

    /// Writes the input's channels of each image and group four to a word (`cg4` words per
    /// position), bytes XORed with `flip`, channels past `cg` the zero point.
    fn interleave(&self, words: &mut [u32], cg: usize, cg4: usize, plane: usize) {
        let pad_row = vec![self.pad ^ self.flip; plane];
        let groups_of = |i: usize| (i / cg4, i % cg4);
        let fill = |i: usize, out: &mut [u32]| {
            let (image_group, q) = groups_of(i);
            let base = image_group * cg * plane;
            let rows: [&[u8]; 4] = std::array::from_fn(|l| {
                let c = q * 4 + l;
                if c < cg {
                    &self.x[base + c * plane..base + (c + 1) * plane]
                } else {
                    &pad_row[..]
                }
            });
            interleave_rows(rows, self.flip, out);
        };
        if words.len() >= 1 << 16 && rayon::current_num_threads() > 1 {
            words
                .par_chunks_mut(plane.max(1))
                .enumerate()
                .for_each(|(i, out)| fill(i, out));
        } else {
            for (i, out) in words.chunks_mut(plane.max(1)).enumerate() {
                fill(i, out);
            }
        }
    }

    /// The rows `rows` of `group` over `n` columns of `b` (bytes, and the stride between its
    /// groups of four depths), written into the output at `dst` from element `first` (the
    /// group's first row at this tile's first column; rows `outputs` apart).
    fn tiles(
        &self,
        group: usize,
        rows: Range<usize>,
        (b, stride): (&[u8], usize),
        n: usize,
        first: usize,
        dst: Dst,
    ) {
        let geom = self.geom;
        let outputs = geom.window.output_len();
        let weights = &self.packed[group];
        let mg = weights.rows();
        let zero = i32::from(self.pad);
        let mut acc: Acc = [[0; NR]; MR];
        for r0 in rows.clone().step_by(MR) {
            let count = MR.min(rows.end - r0).min(mg - r0);
            let mut tile_rows = TileRows::default();
            for r in 0..count {
                let channel = group * mg + r0 + r;
                tile_rows.scale[r] = self.scales[channel];
                tile_rows.shift[r] = zero * weights.row_sum(r0 + r);
                tile_rows.bias[r] = self.bias.map_or(0.0, |b| b[channel]);
            }
            for c0 in (0..n).step_by(NR) {
                gemm_i8::tile(weights, r0, &b[c0 * 4..], stride, &mut acc);
                let place = Place {
                    rows: count,
                    cols: NR.min(n - c0),
                    at: first + r0 * outputs + c0,
                    stride: outputs,
                };
                // SAFETY: rows `r0..r0 + count` of this task's group, columns `c0..c0 +
                // cols` of its tile: inside the output (checked in `all`), and no other task
                // writes them.
                unsafe { finish(&acc, &tile_rows, place, self.residual, self.epilogue, dst) };
            }
        }
    }
}

/// The per-row terms of one tile: `out = (sum − shift) · scale + bias`.
#[derive(Default)]
struct TileRows {
    scale: [f32; MR],
    shift: [i32; MR],
    bias: [f32; MR],
}

/// Where a tile's outputs go: `rows × cols` elements from element `at` of the output, rows
/// `stride` apart.
#[derive(Clone, Copy)]
struct Place {
    rows: usize,
    cols: usize,
    at: usize,
    stride: usize,
}

/// Scales a tile's sums to f32, adds the bias and residual, applies the activation and
/// writes the rows at `place` (quantized when `out` asks).
///
/// # Safety
/// The rows at `place` must lie inside the output `out` points to, and no other thread may
/// access them meanwhile.
unsafe fn finish(
    acc: &Acc,
    rows: &TileRows,
    place: Place,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    out: Dst,
) {
    finish_tile(acc, rows, place, residual, epilogue, out);
}

multiversion! {
    /// [`finish`]'s work, compiled per SIMD level; its caller vouches for the writes.
    fn finish_tile<>(
        acc: &Acc,
        rows: &TileRows,
        place: Place,
        residual: Option<&[f32]>,
        epilogue: Epilogue,
        out: Dst,
    ) {
        let cols = place.cols;
        for (r, sums) in acc.iter().enumerate().take(place.rows) {
            let at = place.at + r * place.stride;
            let (shift, scale, bias) = (rows.shift[r], rows.scale[r], rows.bias[r]);
            let mut line = [0f32; NR];
            for (v, &s) in line.iter_mut().zip(sums) {
                *v = (s - shift) as f32 * scale + bias;
            }
            if let Some(res) = residual {
                line.iter_mut().zip(&res[at..at + cols]).for_each(|(v, x)| *v += x);
            }
            epilogue.apply(&mut line);
            match out {
                // SAFETY: `finish`'s caller guarantees row `r` of `place` is inside the
                // output and ours.
                Dst::Float(p) => unsafe {
                    std::ptr::copy_nonoverlapping(line.as_ptr(), p.get().add(at), cols)
                },
                Dst::Quantized { ptr, scale, zero_point, range } => {
                    let mut bytes = [0u8; NR];
                    quantize_into(&line, &mut bytes, scale, zero_point, range);
                    // SAFETY: as above.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.get().add(at), cols) };
                }
            }
        }
    }
}
