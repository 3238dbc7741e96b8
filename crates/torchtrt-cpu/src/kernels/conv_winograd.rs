//! Winograd F(2×2, 3×3) convolution for f32 layers with constant 3×3 weights, stride 1, no
//! dilation and one group: each 2×2 block of outputs (a tile) comes from a 4×4 input patch
//! with 16 products per channel pair instead of 36.
//!
//! The weights are transformed once, when the kernel is prepared, into 16 matrices
//! `U[ξ]` of `out_channels × channels`. A run transforms the input patches of a block of
//! tile rows into `V[c][ξ][tile]`, multiplies `M[ξ] = U[ξ] · V[ξ]` with one gemm per `ξ`,
//! and transforms `M[m][ξ][tile]` back into the output, adding the bias and the fused
//! activation there.

use rayon::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::Convolution;

use super::convolution::{ConvGeom, SendPtr};
use super::winograd_f4 as f4;
use crate::linalg::{
    Block as PackedBlock, Epilogue, GemmElem, MatRef, PackedLhs, Rhs, gemm_into, run_block,
};
use crate::scratch::with_scratch;

/// Defines method `$name` of [`Block`] as a call of the `#[inline(always)]` method `$body`
/// compiled for the widest vector instructions the CPU has (AVX-512, AVX2 + FMA, or the
/// baseline).
macro_rules! widest {
    ($(#[$doc:meta])* fn $name:ident(&self, $($arg:ident: $ty:ty),*) => $body:ident) => {
        $(#[$doc])*
        fn $name(&self, $($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn v4(b: &Block<'_>, $($arg: $ty),*) {
                    b.$body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn v3(b: &Block<'_>, $($arg: $ty),*) {
                    b.$body($($arg),*)
                }
                if crate::simd::v4() {
                    // SAFETY: `v4()` holds only when the CPU has AVX-512 F, AVX2 and FMA.
                    return unsafe { v4(self, $($arg),*) };
                }
                if crate::simd::v3() {
                    // SAFETY: `v3()` holds only when the CPU has AVX2 and FMA.
                    return unsafe { v3(self, $($arg),*) };
                }
            }
            self.$body($($arg),*)
        }
    };
}

/// Transform points per tile (4 × 4).
const POINTS: usize = 16;

/// Bytes of transformed input and products one block of tile rows aims for.
const BLOCK_BYTES: usize = 1024 * 1024;

/// The fewest tiles of a block: the width of its products, below which the gemms run far
/// from their peak. Images with fewer tiles are one block whose products are split over the
/// threads.
const MIN_TILES: usize = 128;

/// The transformed weights of one layer.
pub(super) struct Winograd {
    /// One matrix of `out_channels × channels` per transform point, row-major, point-major;
    /// empty when `packed` holds them.
    u: Vec<f32>,
    /// The same matrices packed for the AVX-512 product, one group per transform point,
    /// when the CPU has it.
    packed: Option<PackedLhs>,
    out_channels: usize,
    channels: usize,
    /// Output tile side: 2 for F(2×2, 3×3), 4 for F(4×4, 3×3).
    tile: usize,
}

impl Winograd {
    /// The transformed weights of `layer` when it is a 2-D, 3×3, stride-1, undilated,
    /// single-group f32 convolution with the constant weights `w`; `None` otherwise. `large`
    /// picks F(4×4, 3×3) (for images known to be large), else F(2×2, 3×3). With the output
    /// `sides` known, the transformed weights are packed once for the AVX-512 product where
    /// its products' widths suit it ([`packs`]).
    pub(super) fn prepare(
        layer: &Convolution,
        w: &Tensor,
        large: bool,
        sides: Option<[usize; 2]>,
    ) -> Option<Winograd> {
        let ones = |v: &[i64]| v.len() == 2 && v.iter().all(|&s| s == 1);
        if layer.groups != 1 || !ones(&layer.strides) || !ones(&layer.dilations) {
            return None;
        }
        let &[out_channels, channels, 3, 3] = w.shape() else {
            return None;
        };
        let g = w.as_slice::<f32>().ok()?;
        let tile = if large { 4 } else { 2 };
        let points = (tile + 2) * (tile + 2);
        let mut u = vec![0f32; points * out_channels * channels];
        let plane = out_channels * channels;
        for (oc, filter) in g.chunks_exact(9).enumerate() {
            let values = if large {
                f4::transform_filter(filter).to_vec()
            } else {
                transform_filter(filter).to_vec()
            };
            for (xi, v) in values.into_iter().enumerate() {
                u[xi * plane + oc] = v;
            }
        }
        let packed = sides
            .filter(|&sides| packs(sides))
            .and_then(|_| PackedLhs::new(&u, points, out_channels, channels));
        if packed.is_some() {
            u = Vec::new();
        }
        Some(Winograd {
            u,
            packed,
            out_channels,
            channels,
            tile,
        })
    }

    /// Transform points per tile.
    fn points(&self) -> usize {
        (self.tile + 2) * (self.tile + 2)
    }

    /// True when the transform pays for `geom`: the channels match the prepared weights, there
    /// are enough of them for the products to dominate the transforms (measured against the
    /// packed AVX-512 product on one thread: squeezenet's 48 → 192 layers on 13×13 took
    /// 0.21 ms through F(2×2) and 0.15 through the product, its 32 → 128 on 27×27 0.29 and
    /// 0.28), and the image is at least 7×7 (res5 of resnet50 is faster here: its products
    /// stream the weights once per run, as im2col does).
    pub(super) fn applies(&self, geom: &ConvGeom) -> bool {
        let win = &geom.window;
        geom.groups == 1
            && geom.channels == self.channels
            && geom.out_channels == self.out_channels
            && win.kernel == [1, 3, 3]
            && win.stride == [1; 3]
            && win.dilation == [1; 3]
            && win.input[0] == 1
            && self.channels >= 64
            && self.out_channels >= 16
            && win.output[1] >= 7
            && win.output[2] >= 7
    }

    /// Runs the convolution of `x` into `out` (shapes as checked by the caller for `geom`):
    /// blocks of tile rows sized for the cache, as many per image as make the task count a
    /// multiple of the threads, with rows shared out evenly (two blocks of 10 and 4 rows had
    /// kept one of two threads busy 70 % of the time); fewer tasks than threads run one
    /// after the other, each split over the threads.
    pub(super) fn run(
        &self,
        geom: &ConvGeom,
        x: &[f32],
        bias: Option<&[f32]>,
        epilogue: Epilogue,
        out: &mut [f32],
    ) -> Result<(), String> {
        let win = &geom.window;
        let (oh, ow) = (win.output[1], win.output[2]);
        let tiles = Tiles {
            rows: oh.div_ceil(self.tile),
            cols: ow.div_ceil(self.tile),
        };
        let (c, m) = (self.channels, self.out_channels);
        let per_row = self.points() * (c + m) * tiles.cols * size_of::<f32>();
        let threads = rayon::current_num_threads();
        let least = MIN_TILES.div_ceil(tiles.cols);
        let mut block = (BLOCK_BYTES / per_row).max(least).min(tiles.rows);
        while block > least && geom.batch * tiles.rows.div_ceil(block) < 2 * threads {
            block = block.div_ceil(2).max(least);
        }
        let mut blocks = tiles.rows.div_ceil(block);
        if threads > 1 && geom.batch * blocks >= threads {
            while !(geom.batch * blocks).is_multiple_of(threads) && blocks < tiles.rows {
                blocks += 1;
            }
        }
        let tasks = geom.batch * blocks;
        let inner = tasks < threads && threads > 1;
        let dst = SendPtr(out.as_mut_ptr());
        let run_task = |t: usize, parallel: bool| -> Result<(), String> {
            let (image, b) = (t / blocks, t % blocks);
            let rows = b * tiles.rows / blocks..(b + 1) * tiles.rows / blocks;
            let job = Block {
                geom,
                tiles: &tiles,
                rows,
                x: &x[image * c * win.input_len()..(image + 1) * c * win.input_len()],
                out: SendPtr(dst.get().wrapping_add(image * m * oh * ow)),
                bias,
                epilogue,
            };
            job.run(self, parallel)
        };
        if inner {
            (0..tasks).try_for_each(|t| run_task(t, true))
        } else if tasks > 1 && threads > 1 {
            (0..tasks)
                .into_par_iter()
                .try_for_each(|t| run_task(t, false))
        } else {
            (0..tasks).try_for_each(|t| run_task(t, false))
        }
    }
}

/// Whether the products of a layer with outputs of `sides` run on the weights packed once:
/// images of at most [`SMALL_OUTPUTS`] outputs, whose products are one vector of 16 tiles
/// wide. The gemm crate packs the weights again on every call, which dominates there (3×3
/// 512 → 512 on 7×7, batch 2, 2 threads: 2.00 → 1.80 ms). Wider products read the
/// transformed input's rows far apart, which the gemm crate packs and the packed product
/// reads in place: 256 → 256 on 14×14 (49 tiles, most lanes of the last vector idle) took
/// 1.29 → 1.50 ms packed, on 56×56 16.2 → 17.4 ms; 64 → 64 on 56×56 gained (1.41 → 1.31).
fn packs([oh, ow]: [usize; 2]) -> bool {
    oh * ow <= SMALL_OUTPUTS
}

/// Outputs per image up to which the products run on weights packed once ([`packs`]).
const SMALL_OUTPUTS: usize = 64;

/// Tiles per output plane: `rows × cols` tiles of outputs.
struct Tiles {
    rows: usize,
    cols: usize,
}

/// One image's block of tile rows.
struct Block<'a> {
    geom: &'a ConvGeom,
    tiles: &'a Tiles,
    rows: std::ops::Range<usize>,
    /// The image's input planes.
    x: &'a [f32],
    /// The image's first output plane.
    out: SendPtr<f32>,
    bias: Option<&'a [f32]>,
    epilogue: Epilogue,
}

impl Block<'_> {
    widest! {
        /// Transforms the 4×4 patches of one input plane under this block's tiles.
        fn input_transform(&self, plane: &[f32], vc: &mut [f32], lines: &mut Vec<f32>, padded: usize)
            => input_transform_body
    }

    widest! {
        /// Transforms one output channel's products into its output rows.
        fn output_transform(&self, mc: &[f32], dst: &mut [f32], bias: f32, ow: usize)
            => output_transform_body
    }

    widest! {
        /// [`Block::input_transform`] for F(4×4, 3×3).
        fn input_transform4(&self, plane: &[f32], vc: &mut [f32], lines: &mut Vec<f32>)
            => input_transform4_body
    }

    widest! {
        /// [`Block::output_transform`] for F(4×4, 3×3).
        fn output_transform4(&self, mc: &[f32], dst: &mut [f32], bias: f32, ow: usize)
            => output_transform4_body
    }

    fn run(&self, wino: &Winograd, parallel: bool) -> Result<(), String> {
        let win = &self.geom.window;
        let (c, m) = (wino.channels, wino.out_channels);
        let n = self.rows.len() * self.tiles.cols;
        let (ih, iw) = (win.input[1], win.input[2]);
        let (oh, ow) = (win.output[1], win.output[2]);
        let (tile, points) = (wino.tile, wino.points());
        let padded = tile * self.tiles.cols + tile.max(2);
        with_scratch(points * n * (c + m), |buf: &mut [f32]| {
            let (v, prod) = buf.split_at_mut(points * n * c);
            let transform_in = |(ch, vc): (usize, &mut [f32]), lines: &mut Vec<f32>| {
                let plane = &self.x[ch * ih * iw..(ch + 1) * ih * iw];
                if tile == 4 {
                    self.input_transform4(plane, vc, lines);
                } else {
                    self.input_transform(plane, vc, lines, padded);
                }
            };
            if parallel {
                v.par_chunks_mut(points * n)
                    .enumerate()
                    .for_each_init(Vec::new, |lines, item| transform_in(item, lines));
            } else {
                let mut lines = Vec::new();
                v.chunks_mut(points * n)
                    .enumerate()
                    .for_each(|item| transform_in(item, &mut lines));
            }
            let products = SendPtr(prod.as_mut_ptr());
            let v: &[f32] = v;
            let multiply = |xi: usize| -> Result<(), String> {
                if let Some(packed) = &wino.packed {
                    let block = PackedBlock {
                        group: xi,
                        rows: 0..m,
                        rhs: Rhs::Rows {
                            data: &v[xi * n..],
                            ldb: points * n,
                        },
                        n,
                        bias: None,
                        epilogue: Epilogue::Identity,
                        steps: None,
                    };
                    // SAFETY: as below: the `m × n` block at column `xi · n` of the products,
                    // rows `points · n` apart, is this call's alone.
                    return unsafe {
                        run_block(packed, &block, products.get().add(xi * n), None, points * n)
                    };
                }
                let lhs = MatRef::row_major(&wino.u[xi * m * c..(xi + 1) * m * c], m, c);
                let rhs = MatRef {
                    data: &v[xi * n..],
                    rows: c,
                    cols: n,
                    row_stride: points * n,
                    col_stride: 1,
                };
                // SAFETY: the `m × n` block at column `xi · n` of the `m × points·n` products
                // lies inside `prod`, and each `xi` is written by one call only.
                unsafe {
                    gemm_into(
                        products.get().add(xi * n),
                        points * n,
                        lhs,
                        rhs,
                        false,
                        false,
                    )
                }
            };
            if parallel {
                (0..points).into_par_iter().try_for_each(multiply)?;
            } else {
                (0..points).try_for_each(multiply)?;
            }
            let first = tile * self.rows.start;
            let end = (tile * self.rows.end).min(oh);
            let out = self.out;
            let transform_out = |(oc, mc): (usize, &[f32])| {
                // SAFETY: output rows `first..end` of plane `oc` belong to this block alone.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        out.get().add(oc * oh * ow + first * ow),
                        (end - first) * ow,
                    )
                };
                let b = self.bias.map_or(0.0, |b| b[oc]);
                if tile == 4 {
                    self.output_transform4(mc, dst, b, ow);
                } else {
                    self.output_transform(mc, dst, b, ow);
                }
                f32::activate(self.epilogue, dst);
            };
            if parallel {
                prod.par_chunks(points * n)
                    .enumerate()
                    .for_each(transform_out);
            } else {
                prod.chunks(points * n).enumerate().for_each(transform_out);
            }
            Ok(())
        })
    }

    /// Transforms the 4×4 patches of one input plane under this block's tiles into `vc`
    /// (`POINTS` rows of this block's tiles); `lines` is scratch for four padded input lines
    /// and their four row combinations.
    #[inline(always)]
    fn input_transform_body(
        &self,
        plane: &[f32],
        vc: &mut [f32],
        lines: &mut Vec<f32>,
        padded: usize,
    ) {
        let win = &self.geom.window;
        let (ih, iw) = (win.input[1], win.input[2]);
        let (pt, pl) = (win.pad_begin[1] as isize, win.pad_begin[2]);
        let cols = self.tiles.cols;
        let n = self.rows.len() * cols;
        lines.resize(8 * padded, 0.0);
        let (d, e) = lines.split_at_mut(4 * padded);
        let inside = pl.min(padded)..(pl + iw).min(padded);
        for (r, ty) in self.rows.clone().enumerate() {
            for (k, line) in d.chunks_exact_mut(padded).enumerate() {
                let y = 2 * ty as isize - pt + k as isize;
                if y < 0 || y >= ih as isize {
                    line.fill(0.0);
                    continue;
                }
                let src = &plane[y as usize * iw..(y as usize + 1) * iw];
                line[..inside.start].fill(0.0);
                line[inside.clone()].copy_from_slice(&src[..inside.len()]);
                line[inside.end..].fill(0.0);
            }
            let (d0, rest) = d.split_at(padded);
            let (d1, rest) = rest.split_at(padded);
            let (d2, d3) = rest.split_at(padded);
            let (e0, rest) = e.split_at_mut(padded);
            let (e1, rest) = rest.split_at_mut(padded);
            let (e2, e3) = rest.split_at_mut(padded);
            for i in 0..padded {
                e0[i] = d0[i] - d2[i];
                e1[i] = d1[i] + d2[i];
                e2[i] = d2[i] - d1[i];
                e3[i] = d1[i] - d3[i];
            }
            for (i, ei) in [&*e0, &*e1, &*e2, &*e3].into_iter().enumerate() {
                let base = r * cols;
                let (pairs, _) = ei.as_chunks::<2>();
                let (v0, rest) = vc[4 * i * n + base..].split_at_mut(n);
                let (v1, rest) = rest.split_at_mut(n);
                let (v2, rest) = rest.split_at_mut(n);
                let v3 = &mut rest[..cols];
                let (v0, v1, v2) = (&mut v0[..cols], &mut v1[..cols], &mut v2[..cols]);
                let (lo, hi) = (&pairs[..cols], &pairs[1..=cols]);
                for tx in 0..cols {
                    let ([a0, a1], [a2, a3]) = (lo[tx], hi[tx]);
                    v0[tx] = a0 - a2;
                    v1[tx] = a1 + a2;
                    v2[tx] = a2 - a1;
                    v3[tx] = a1 - a3;
                }
            }
        }
    }

    /// Transforms one output channel's products `mc` (`POINTS` rows of this block's tiles)
    /// into its output rows `dst` (`ow` wide), adding `bias`.
    #[inline(always)]
    fn output_transform_body(&self, mc: &[f32], dst: &mut [f32], bias: f32, ow: usize) {
        let (cols, rows) = (self.tiles.cols, self.rows.len());
        let n = rows * cols;
        let height = dst.len() / ow;
        for r in (0..rows).take_while(|r| 2 * r < height) {
            let m: [&[f32]; POINTS] = std::array::from_fn(|xi| &mc[xi * n + r * cols..]);
            for t0 in descending_steps(cols, LANES) {
                let step = LANES.min(cols - t0);
                let lanes: [[f32; LANES]; POINTS] =
                    std::array::from_fn(|xi| f4::load(&m[xi][t0..], step));
                let y = transform_lanes(&lanes, bias);
                let take = (ow - 2 * t0).min(2 * LANES);
                for (k, yk) in y.iter().enumerate().take(height - 2 * r) {
                    f4::store(&mut dst[(2 * r + k) * ow + 2 * t0..], yk, take);
                }
            }
        }
    }
}

impl Block<'_> {
    /// Transforms the 6×6 patches of one input plane under this block's tiles into `vc`
    /// (36 rows of this block's tiles); `lines` is scratch for a zero input line and the
    /// vertically transformed and phase-split rows of [`f4::input_row`].
    #[inline(always)]
    fn input_transform4_body(&self, plane: &[f32], vc: &mut [f32], lines: &mut Vec<f32>) {
        let win = &self.geom.window;
        let (ih, iw) = (win.input[1], win.input[2]);
        let (pt, pl) = (win.pad_begin[1] as isize, win.pad_begin[2]);
        let cols = self.tiles.cols;
        let n = self.rows.len() * cols;
        let zero = iw + 16;
        lines.resize(f4::row_scratch(cols) + zero, 0.0);
        let (zeros, scratch) = lines.split_at_mut(zero);
        zeros.fill(0.0);
        let zeros: &[f32] = zeros;
        for (r, ty) in self.rows.clone().enumerate() {
            let src: [&[f32]; 6] = std::array::from_fn(|k| {
                let y = 4 * ty as isize - pt + k as isize;
                if y < 0 || y >= ih as isize {
                    zeros
                } else {
                    &plane[y as usize * iw..]
                }
            });
            let mut rows = vc.chunks_exact_mut(n);
            let mut v: [&mut [f32]; f4::POINTS] = std::array::from_fn(|_| {
                let row = rows.next().unwrap_or_default();
                &mut row[r * cols..]
            });
            f4::input_row(&src, iw, pl, scratch, &mut v, cols);
        }
    }

    /// Transforms one output channel's products `mc` (36 rows of this block's tiles) into its
    /// output rows `dst` (`ow` wide), adding `bias`.
    #[inline(always)]
    fn output_transform4_body(&self, mc: &[f32], dst: &mut [f32], bias: f32, ow: usize) {
        let (cols, rows) = (self.tiles.cols, self.rows.len());
        let n = rows * cols;
        let height = dst.len() / ow;
        for r in (0..rows).take_while(|r| 4 * r < height) {
            let m: [&[f32]; f4::POINTS] = std::array::from_fn(|xi| &mc[xi * n + r * cols..]);
            for t0 in descending_steps(cols, f4::LANES) {
                let step = f4::LANES.min(cols - t0);
                let lanes: [[f32; f4::LANES]; f4::POINTS] =
                    std::array::from_fn(|xi| f4::load(&m[xi][t0..], step));
                let y = f4::output_lanes(&lanes, bias);
                let take = (ow - 4 * t0).min(4 * f4::LANES);
                for (k, yk) in y.iter().enumerate().take(height - 4 * r) {
                    f4::store(&mut dst[(4 * r + k) * ow + 4 * t0..], yk, take);
                }
            }
        }
    }
}

/// The first tile of each step of `lanes` tiles over `cols` tiles, last step first.
///
/// The output transforms store whole vectors wherever the block's rows have room, so a
/// row's last, partial step spills into the rows after it; taking that step first lets
/// the later stores overwrite the spill.
fn descending_steps(cols: usize, lanes: usize) -> impl Iterator<Item = usize> {
    (0..cols.div_ceil(lanes)).rev().map(move |s| s * lanes)
}

/// Tiles the vector path of the output transform takes at a time (one vector of f32).
const LANES: usize = 16;

/// `Aᵀ m A + bias` for `LANES` tiles side by side: `m[ξ][tile]` in, the tiles' two output
/// rows out, each `2 · LANES` wide (tile `k` at columns `2k` and `2k + 1`).
#[inline(always)]
fn transform_lanes(m: &[[f32; LANES]; POINTS], bias: f32) -> [[f32; 2 * LANES]; 2] {
    let mut y = [[0f32; 2 * LANES]; 2];
    let mut s = [[[0f32; LANES]; 4]; 2];
    for j in 0..4 {
        let (m0, m1, m2, m3) = (&m[j], &m[4 + j], &m[8 + j], &m[12 + j]);
        for k in 0..LANES {
            s[0][j][k] = m0[k] + m1[k] + m2[k];
            s[1][j][k] = m1[k] - m2[k] - m3[k];
        }
    }
    for (row, si) in y.iter_mut().zip(&s) {
        for k in 0..LANES {
            row[2 * k] = si[0][k] + si[1][k] + si[2][k] + bias;
            row[2 * k + 1] = si[1][k] - si[2][k] - si[3][k] + bias;
        }
    }
    y
}

/// `G g Gᵀ` of one 3×3 filter `g` (row-major), as 16 points row-major.
fn transform_filter(g: &[f32]) -> [f32; POINTS] {
    let rows = |a: f32, b: f32, c: f32| [a, 0.5 * (a + b + c), 0.5 * (a - b + c), c];
    let mut gg = [[0f32; 3]; 4];
    for col in 0..3 {
        let t = rows(g[col], g[3 + col], g[6 + col]);
        for (i, v) in t.into_iter().enumerate() {
            gg[i][col] = v;
        }
    }
    let mut u = [0f32; POINTS];
    for (i, r) in gg.iter().enumerate() {
        u[4 * i..4 * i + 4].copy_from_slice(&rows(r[0], r[1], r[2]));
    }
    u
}
