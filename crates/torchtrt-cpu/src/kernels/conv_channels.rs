//! f32 convolution of images with few output positions (a network's last stage: 7×7
//! outputs of hundreds of channels) with the output channels along the vector lanes:
//! the weights are packed once as the constant right operand of [`PackedRhs`] (taps ×
//! output channels), the unfolded input is turned into one row of taps per output
//! position, and the product's rows of channels are turned back into the channels' planes
//! with the residual and activation applied. The position-vectorised product
//! ([`super::conv_packed`]) leaves most lanes of its last vector idle on 49 positions.
//! On 14×14 (196 positions) the two transposes cost more than they save, hence
//! [`MAX_OUTPUTS`].

use rayon::prelude::*;

use super::convolution::ConvGeom;
use crate::linalg::{Epilogue, Finish, PackedRhs, im2col};
use crate::scratch::with_scratch;

const WHAT: &str = "Convolution";

/// Most output positions per image this path takes.
const MAX_OUTPUTS: usize = 64;

/// Fewest output channels this path takes: a full panel of vector lanes.
const MIN_OUT_CHANNELS: usize = 64;

/// Whether a layer of `out_channels` output channels in one group, producing `outputs`
/// positions per image, runs here.
pub(super) fn takes(groups: usize, out_channels: usize, outputs: usize) -> bool {
    groups == 1 && out_channels >= MIN_OUT_CHANNELS && (1..=MAX_OUTPUTS).contains(&outputs)
}

/// The f32 weights `w` (`[M, C, k…]`, one group) packed as the right operand (taps × M);
/// `None` without AVX-512: with AVX2 alone, [`super::conv_packed`]'s narrow strips take
/// these layers' last few positions.
pub(super) fn pack(w: &[f32], out_channels: usize, taps: usize) -> Option<PackedRhs> {
    if !crate::simd::v4() || w.len() != out_channels.checked_mul(taps)? {
        return None;
    }
    PackedRhs::new(w, taps, out_channels, 1, taps)
}

/// `out = epilogue(conv(x, w) + bias + residual)` with `w` packed by [`pack`].
pub(super) fn conv_channels(
    geom: &ConvGeom,
    x: &[f32],
    rhs: &PackedRhs,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    out: &mut [f32],
) -> Result<(), String> {
    let win = &geom.window;
    let (plane, outputs) = (win.input_len(), win.output_len());
    let taps = geom.channels * win.kernel_len();
    let (image_in, image_out) = (geom.channels * plane, geom.out_channels * outputs);
    if !takes(geom.groups, geom.out_channels, outputs)
        || rhs.depth() != taps
        || x.len() != geom.batch * image_in
        || out.len() != geom.batch * image_out
        || residual.is_some_and(|r| r.len() != out.len())
    {
        return Err(format!(
            "{WHAT}: packed channel weights do not fit the layer"
        ));
    }
    let threads = rayon::current_num_threads();
    let pointwise = win.is_pointwise();
    let unfold = if pointwise { 0 } else { taps * outputs };
    let scratch_len = taps * outputs + unfold + image_out;
    for (image, dst) in out.chunks_exact_mut(image_out).enumerate() {
        let src = &x[image * image_in..(image + 1) * image_in];
        let residual = residual.map(|r| &r[image * image_out..(image + 1) * image_out]);
        with_scratch(scratch_len, |scratch: &mut [f32]| {
            let (rows, rest) = scratch.split_at_mut(taps * outputs);
            let (cols, product) = rest.split_at_mut(unfold);
            let product = &mut product[..image_out];
            let cols: &[f32] = if pointwise {
                src
            } else {
                let kernel = win.kernel_len();
                cols.par_chunks_mut(kernel * outputs)
                    .zip(src.par_chunks_exact(plane))
                    .for_each(|(c, channel)| im2col(channel, 1, win, 0.0, 0..outputs, c));
                cols
            };
            transpose(cols, taps, outputs, rows);
            rhs.product(rows, taps, outputs, Finish::bias(bias), product, threads)?;
            planes(product, outputs, residual, epilogue, dst);
            Ok::<(), String>(())
        })?;
    }
    Ok(())
}

/// Columns of the source one task of [`transpose`] and [`planes`] moves, and rows of the
/// source per step: each step reads and writes `BLOCK` lines, which stay in L1 even when
/// the rows lie a multiple of 4 KiB apart and so map to one cache set.
const BLOCK: usize = 8;

/// `dst[j · rows + i] = src[i · cols + j]`: the `rows × cols` matrix `src` as `cols` rows of
/// `rows`, in blocks of [`BLOCK`] columns.
fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    dst[..rows * cols]
        .par_chunks_mut(BLOCK * rows)
        .enumerate()
        .for_each(|(b, block)| gather(src, cols, b * BLOCK, rows, block));
}

/// Rows `j0..` of the transpose of `src` (rows of `cols`) into `block` (rows of `rows`),
/// [`BLOCK`] source rows at a time.
fn gather(src: &[f32], cols: usize, j0: usize, rows: usize, block: &mut [f32]) {
    for i0 in (0..rows).step_by(BLOCK) {
        let i1 = (i0 + BLOCK).min(rows);
        for (jj, line) in block.chunks_exact_mut(rows).enumerate() {
            for (i, d) in (i0..i1).zip(&mut line[i0..i1]) {
                *d = src[i * cols + j0 + jj];
            }
        }
    }
}

/// `dst[j · rows + i] = epilogue(product[i · cols + j] + residual[j · rows + i])` for the
/// `rows × cols` product (`cols = dst.len() / rows`): each channel's plane from the
/// product's rows of channels, [`BLOCK`] planes per task.
fn planes(
    product: &[f32],
    rows: usize,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    dst: &mut [f32],
) {
    let cols = dst.len() / rows;
    dst.par_chunks_mut(BLOCK * rows)
        .enumerate()
        .for_each(|(b, block)| {
            let j0 = b * BLOCK;
            gather(product, cols, j0, rows, block);
            if let Some(r) = residual {
                for (d, &v) in block.iter_mut().zip(&r[j0 * rows..]) {
                    *d += v;
                }
            }
            epilogue.apply(block);
        });
}
