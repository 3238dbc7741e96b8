//! f32 convolution through the packed product (AVX-512 or AVX2): each task takes one (image, group),
//! a tile of output positions (a multiple of [`NR`]) and a range of output channels,
//! reads its columns in place (1×1 layers; stride-1 layers from their padded image, see
//! [`Grid`]) or unfolds them with im2col, and writes its outputs with bias, residual and
//! activation applied.

use rayon::prelude::*;

use super::conv_grid::GridShape;
use super::convolution::{ConvGeom, SendPtr};
use crate::linalg::{Block, Epilogue, Grid, MR, NR, PackedLhs, Rhs, grids, im2col, run_block};
use crate::scratch::{Kept, with_scratch};

const WHAT: &str = "Convolution";

/// Tasks per thread the work is cut into, so uneven tasks still balance.
const TASKS_PER_THREAD: usize = 8;

/// Most output (or grid) positions of a task that reads its input in place: a block of the
/// input (128 channels of it) stays in L2 while every row panel of the weights passes over
/// it.
const POINTWISE_COLS: usize = 10 * NR;

/// Bytes of one group's weights above which an unfolded layer takes each image whole: its
/// weights then come from memory once per tile of columns, not from L2, so one tile per
/// image reads them least (measured on a 2-core Xeon, 3×3 256 → 256 channels of 28×28
/// images at stride 2, batch 2: 2.31 → 1.87 ms with one tile per image against four).
const RESIDENT_WEIGHTS: usize = 1 << 20;

/// Most elements of the whole im2col matrix unfolded once, in parallel, and shared by the
/// tasks when the channels are split (instead of each task unfolding its columns again).
const SHARED_ELEMS: usize = 4 << 20;

/// Bytes of one im2col tile (at least one output line wide): it stays in L1 while the
/// product reads it.
const TILE_BYTES: usize = 48 * 1024;

/// `out = epilogue(conv(x, w) + bias + residual)` with `w` packed in `lhs`. With several
/// threads the work is cut into about [`TASKS_PER_THREAD`] tasks per thread, by columns,
/// then by output channels; a 1×1 layer with more output channels than positions splits
/// the channels first, so each task reads only its part of the (larger) weights. A last
/// column tile of less than half a register tile joins the one before: each column tile
/// streams all its rows' weights once (7×7 outputs are one tile of 49, not 48 + 1).
pub(super) fn conv_packed(
    geom: &ConvGeom,
    x: &[f32],
    lhs: &PackedLhs,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    out: &mut [f32],
) -> Result<(), String> {
    let win = &geom.window;
    let groups = geom.groups;
    let (cg, mg) = (geom.channels / groups, geom.out_channels / groups);
    let (plane, outputs, taps) = (win.input_len(), win.output_len(), cg * win.kernel_len());
    let total = geom.batch * geom.out_channels * outputs;
    if out.len() != total || residual.is_some_and(|r| r.len() != total) {
        return Err(format!(
            "{WHAT}: the output ({}) or residual has not {total} elements",
            out.len()
        ));
    }
    if x.len() != geom.batch * geom.channels * plane
        || bias.is_some_and(|b| b.len() != geom.out_channels)
        || !lhs.fits(groups, mg, taps)
    {
        return Err(format!("{WHAT}: packed weights do not fit the layer"));
    }
    if total == 0 {
        return Ok(());
    }
    let pointwise = win.is_pointwise();
    let shape = (!pointwise && grids())
        .then(|| GridShape::of(win))
        .flatten();
    let columns = shape.as_ref().map_or(outputs, |g| g.len);
    let threads = rayon::current_num_threads();
    let wanted = if threads > 1 {
        TASKS_PER_THREAD * threads
    } else {
        1
    };
    let row_panels = mg.div_ceil(MR);
    let pairs = geom.batch * groups;
    let split_rows = |mut row_tiles: usize, units: usize| {
        while units * row_tiles < wanted && row_panels >= 2 * row_tiles {
            row_tiles *= 2;
        }
        row_tiles
    };
    let mut row_tiles = if pointwise && mg > outputs {
        split_rows(1, pairs)
    } else {
        1
    };
    let mut width = columns
        .div_ceil(wanted.div_ceil(pairs * row_tiles))
        .next_multiple_of(NR);
    if pointwise || shape.is_some() {
        width = width.min(POINTWISE_COLS);
    } else {
        let line = win.output[2].min(outputs).next_multiple_of(NR);
        width = width.min((TILE_BYTES / (4 * taps) / NR * NR).max(line));
    }
    let streamed = shape.is_none() && !pointwise && 4 * mg * taps > RESIDENT_WEIGHTS;
    if streamed {
        width = columns;
    }
    let mut col_tiles = columns.div_ceil(width);
    if col_tiles > 1 && columns - (col_tiles - 1) * width < NR / 2 {
        col_tiles -= 1;
    }
    row_tiles = if streamed {
        threads.div_ceil(pairs).min(row_panels)
    } else {
        split_rows(row_tiles, pairs * col_tiles)
    };
    let height = row_panels.div_ceil(row_tiles) * MR;
    let per_image_group = col_tiles * row_tiles;
    let tasks = geom.batch * groups * per_image_group;
    let mut kept = shape.as_ref().map(|_| {
        (
            Kept::<Vec<f32>>::shared("padded image"),
            Kept::<Vec<usize>>::shared("padded image taps"),
        )
    });
    let grid = shape
        .as_ref()
        .zip(kept.as_mut())
        .map(|(g, (buf, offsets))| {
            g.taps(win, cg, offsets);
            let padded = g.image(x, geom.batch * geom.channels, win, buf);
            (g, padded, &offsets[..])
        });
    let shared =
        (shape.is_none() && !pointwise && row_tiles > 1 && pairs * taps * outputs <= SHARED_ELEMS)
            .then(|| {
                let mut cols = vec![0f32; pairs * taps * outputs];
                let kernel = win.kernel_len();
                cols.par_chunks_mut(kernel * outputs)
                    .enumerate()
                    .for_each(|(i, rows)| {
                        let (image, channel) = (i / geom.channels, i % geom.channels);
                        let src = &x[(image * geom.channels + channel) * plane..][..plane];
                        im2col(src, 1, win, 0.0, 0..outputs, rows);
                    });
                cols
            });
    let dst = SendPtr(out.as_mut_ptr());
    let task = |t: usize| -> Result<(), String> {
        let (image_group, rest) = (t / per_image_group, t % per_image_group);
        let (image, group) = (image_group / groups, image_group % groups);
        let (tile, m0) = (rest / row_tiles, (rest % row_tiles) * height);
        let j0 = tile * width;
        let n = if tile + 1 == col_tiles {
            columns - j0
        } else {
            width
        };
        let m1 = (m0 + height).min(mg);
        if m0 >= m1 {
            return Ok(());
        }
        let start = (image * geom.channels + group * cg) * plane;
        let xg = &x[start..start + cg * plane];
        let plane_start = (image * geom.out_channels + group * mg + m0) * outputs;
        let first = if grid.is_some() {
            plane_start
        } else {
            plane_start + j0
        };
        let residual = residual.map(|r| r[first..].as_ptr());
        let dst = dst.get().wrapping_add(first);
        let bias = bias.map(|b| &b[group * mg..(group + 1) * mg]);
        let run = |rhs: Rhs<'_>| {
            let block = Block {
                group,
                rows: m0..m1,
                rhs,
                n,
                bias,
                epilogue,
                steps: None,
            };
            // SAFETY: the `(m1 - m0) × n` tile at `dst` with row stride `outputs` lies inside
            // `out` (its image, channels and columns are in range; a grid's columns are
            // stored at their output positions, which lie in the task's rows) and is this
            // task's alone; the residual has the output's layout.
            unsafe { run_block(lhs, &block, dst, residual, outputs) }
        };
        if let Some((g, padded, offsets)) = &grid {
            let plane = g.plane();
            let data = &padded[(image * geom.channels + group * cg) * plane..];
            return run(Rhs::Grid(Grid {
                data: &data[..cg * plane],
                offsets,
                start: j0,
                width: g.width,
                valid: g.valid,
            }));
        }
        if pointwise {
            return run(Rhs::Rows {
                data: &xg[j0..],
                ldb: outputs,
            });
        }
        if let Some(cols) = &shared {
            return run(Rhs::Rows {
                data: &cols[image_group * taps * outputs + j0..],
                ldb: outputs,
            });
        }
        with_scratch(taps * n, |col: &mut [f32]| {
            im2col(xg, cg, win, 0.0, j0..j0 + n, col);
            run(Rhs::Rows { data: col, ldb: n })
        })
    };
    if tasks > 1 && threads > 1 {
        (0..tasks).into_par_iter().try_for_each(task)
    } else {
        (0..tasks).try_for_each(task)
    }
}
