//! Convolutions whose windows read padding for many of their outputs: dilated 3×3 layers
//! on small images (DeepLabV3's backbone at dilation 4 and its ASPP branches at 12 and 24 on
//! 28×28 features, where most taps of most outputs fall in the padding). Along each spatial
//! dim the outputs fall into bands within which every tap either reads the input for every
//! output or reads only padding; each rectangle of two bands multiplies only its live taps,
//! unfolded without padding checks. The weights are packed with the taps outermost (inner
//! step `tap · C + c`), so a rectangle's live taps are a few contiguous runs of inner steps
//! of the one packed operand ([`Block::steps`]).

use std::ops::Range;

use rayon::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::Convolution;

use super::convolution::{ConvGeom, SendPtr};
use crate::linalg::{Block, Epilogue, MR, NR, PackedLhs, Rhs, run_block};
use crate::scratch::with_scratch;

const WHAT: &str = "Convolution";

/// The products a dilated layer must save (as a share `1 / LEAST_SAVING` of all) to be cut
/// into rectangles: each rectangle is a product of its own, with a narrower tile than the
/// whole image's. Undilated layers are not cut: their padding is a thin border (a 3×3 layer
/// on 14×14 would save 14 % in rectangles one output wide), and windows that read only
/// padding are cut from them beforehand ([`super::conv_taps`]).
const LEAST_SAVING: usize = 8;

/// Most bands along one dim: more would cut the image into rectangles too small to run
/// near the product's speed.
const MOST_BANDS: usize = 8;

/// Largest padded extent along a dim the cut takes: it visits every output of each dim once
/// at prepare time, and bounds the position arithmetic.
const MOST_EXTENT: usize = 1 << 20;

/// Bytes of one unfolded tile: it stays in L1 and L2 while the product reads it.
const TILE_BYTES: usize = 48 * 1024;

/// Tasks per thread the work is cut into, so uneven tasks still balance.
const TASKS_PER_THREAD: usize = 8;

/// Consecutive outputs along one dim whose windows read the input at the same taps.
#[derive(Clone, Debug, PartialEq)]
struct Band {
    outputs: Range<usize>,
    taps: Range<usize>,
}

/// One spatial dim of the layer.
#[derive(Clone, Copy, Debug)]
struct Axis {
    input: usize,
    output: usize,
    taps: usize,
    stride: usize,
    dilation: usize,
    pad: usize,
}

impl Axis {
    /// The taps of output `o` that read the input (a range: the taps read increasing
    /// positions).
    fn live(&self, o: usize) -> Range<usize> {
        let reads = |k: usize| {
            let at = o * self.stride + k * self.dilation;
            at >= self.pad && at - self.pad < self.input
        };
        match (0..self.taps).find(|&k| reads(k)) {
            Some(first) => first..(first..self.taps).take_while(|&k| reads(k)).count() + first,
            None => 0..0,
        }
    }

    /// The outputs in bands of equal live taps.
    fn bands(&self) -> Vec<Band> {
        let mut bands: Vec<Band> = Vec::new();
        for o in 0..self.output {
            let taps = self.live(o);
            match bands.last_mut() {
                Some(b) if b.taps == taps => b.outputs.end = o + 1,
                _ => bands.push(Band {
                    outputs: o..o + 1,
                    taps,
                }),
            }
        }
        bands
    }

    /// Input position of output `o` at tap `k` (a live tap of `o`).
    fn at(&self, o: usize, k: usize) -> usize {
        o * self.stride + k * self.dilation - self.pad
    }
}

/// A rectangle of outputs and the taps its windows read.
#[derive(Clone, Debug)]
struct Rect {
    rows: Band,
    cols: Band,
}

impl Rect {
    fn positions(&self) -> usize {
        self.rows.outputs.len() * self.cols.outputs.len()
    }

    fn taps(&self) -> usize {
        self.rows.taps.len() * self.cols.taps.len()
    }
}

/// A 2-D convolution of one group cut into rectangles of outputs with their live taps.
pub(super) struct Regions {
    /// The weights, packed with the taps outermost.
    lhs: PackedLhs,
    rects: Vec<Rect>,
    axes: [Axis; 2],
    channels: usize,
    out_channels: usize,
}

/// One task: an image, a rectangle, `n` of its positions from `first`, and output channels.
struct Task {
    image: usize,
    rect: usize,
    first: usize,
    n: usize,
    rows: Range<usize>,
}

impl Regions {
    /// The regions of `layer` on images of dims `x` (`[C, H, W]`) with
    /// f32 weights `w` (`[M, C, KH, KW]`), when it is dilated and has one group, the packed
    /// product runs on this CPU, and cutting saves at least `1 / LEAST_SAVING` of the
    /// products.
    pub(super) fn new(layer: &Convolution, x: &[usize], w: &Tensor) -> Option<Regions> {
        let (&[channels, h, wd], &[out_channels, wc, kh, kw]) = (x, w.shape()) else {
            return None;
        };
        let dilated = layer.dilations.iter().any(|&d| d > 1);
        let planar = [
            &layer.strides,
            &layer.dilations,
            &layer.pads_begin,
            &layer.pads_end,
        ]
        .iter()
        .all(|v| v.len() == 2);
        if layer.groups != 1 || wc != channels || !planar || !dilated {
            return None;
        }
        let mut axes = [(h, kh), (wd, kw)]
            .into_iter()
            .enumerate()
            .map(|(d, (n, k))| {
                let unsigned = |v: i64| usize::try_from(v).ok();
                let (stride, dilation) =
                    (unsigned(layer.strides[d])?, unsigned(layer.dilations[d])?);
                let (pad, end) = (unsigned(layer.pads_begin[d])?, unsigned(layer.pads_end[d])?);
                let extent = n.checked_add(pad)?.checked_add(end)?;
                let span = dilation.checked_mul(k.checked_sub(1)?)? + 1;
                let room = extent.checked_sub(span)?;
                let bounded = extent <= MOST_EXTENT && stride <= extent && dilation <= extent;
                (stride > 0 && dilation > 0 && bounded).then_some(Axis {
                    input: n,
                    output: room / stride + 1,
                    taps: k,
                    stride,
                    dilation,
                    pad,
                })
            });
        let axes = [axes.next()??, axes.next()??];
        let (rows, cols) = (axes[0].bands(), axes[1].bands());
        if rows.len() > MOST_BANDS || cols.len() > MOST_BANDS {
            return None;
        }
        let rects: Vec<Rect> = rows
            .iter()
            .flat_map(|r| {
                cols.iter().map(|c| Rect {
                    rows: r.clone(),
                    cols: c.clone(),
                })
            })
            .collect();
        let all = axes[0].output * axes[1].output * kh * kw;
        let kept: usize = rects.iter().map(|r| r.positions() * r.taps()).sum();
        if LEAST_SAVING * (all - kept) < all {
            return None;
        }
        let values = w.as_slice::<f32>().ok()?;
        let taps = kh * kw;
        let mut outer = vec![0f32; values.len()];
        for (m, filter) in values.chunks_exact(channels * taps).enumerate() {
            let row = &mut outer[m * channels * taps..][..channels * taps];
            for (c, window) in filter.chunks_exact(taps).enumerate() {
                for (t, &v) in window.iter().enumerate() {
                    row[t * channels + c] = v;
                }
            }
        }
        Some(Regions {
            lhs: PackedLhs::new(&outer, 1, out_channels, channels * taps)?,
            rects,
            axes,
            channels,
            out_channels,
        })
    }

    /// True when `geom` is the layer these regions were cut for.
    pub(super) fn applies(&self, geom: &ConvGeom) -> bool {
        let win = &geom.window;
        geom.groups == 1
            && (geom.channels, geom.out_channels) == (self.channels, self.out_channels)
            && win.input[0] == 1
            && win.input[1..] == [self.axes[0].input, self.axes[1].input]
            && win.output[1..] == [self.axes[0].output, self.axes[1].output]
    }

    /// `out = epilogue(conv(x, w) + bias + residual)` over every rectangle.
    pub(super) fn run(
        &self,
        geom: &ConvGeom,
        x: &[f32],
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        epilogue: Epilogue,
        out: &mut [f32],
    ) -> Result<(), String> {
        let [ay, ax] = self.axes;
        let (plane, outputs) = (ay.input * ax.input, ay.output * ax.output);
        let total = geom.batch * self.out_channels * outputs;
        if !self.applies(geom)
            || x.len() != geom.batch * self.channels * plane
            || out.len() != total
            || residual.is_some_and(|r| r.len() != total)
            || bias.is_some_and(|b| b.len() != self.out_channels)
        {
            return Err(format!("{WHAT}: the layer does not fit its regions"));
        }
        let tasks = self.tasks(geom.batch);
        let dst = SendPtr(out.as_mut_ptr());
        let task = |t: &Task| -> Result<(), String> {
            let rect = &self.rects[t.rect];
            let depth = self.channels * rect.taps();
            let m = t.rows.len();
            with_scratch(depth * t.n + 2 * m * t.n, |buf: &mut [f32]| {
                let (col, rest) = buf.split_at_mut(depth * t.n);
                let (tile, res) = rest.split_at_mut(m * t.n);
                let image = &x[t.image * self.channels * plane..][..self.channels * plane];
                self.unfold(rect, image, t.first, col, t.n);
                let from = t.image * self.out_channels * outputs;
                let residual = residual.map(|r| {
                    self.gather(rect, &r[from..], t, res);
                    res.as_ptr()
                });
                if depth == 0 {
                    for (row, m) in tile.chunks_exact_mut(t.n).zip(t.rows.clone()) {
                        row.fill(bias.map_or(0.0, |b| b[m]));
                    }
                    if residual.is_some() {
                        tile.iter_mut().zip(&res[..]).for_each(|(v, r)| *v += r);
                    }
                    epilogue.apply(tile);
                } else {
                    let steps = self.steps(rect);
                    let block = Block {
                        group: 0,
                        rows: t.rows.clone(),
                        rhs: Rhs::Rows {
                            data: col,
                            ldb: t.n,
                        },
                        n: t.n,
                        bias: bias.map(|b| &b[..t.rows.end]),
                        epilogue,
                        steps: Some(&steps),
                    };
                    // SAFETY: `tile` and `res` hold `m × n` elements, rows `n` apart.
                    unsafe { run_block(&self.lhs, &block, tile.as_mut_ptr(), residual, t.n) }?;
                }
                // SAFETY: the task's positions of its rectangle and its output channels of
                // its image lie inside `out` and belong to no other task.
                unsafe { self.scatter(rect, tile, t, dst.get().wrapping_add(from)) };
                Ok(())
            })
        };
        if tasks.len() > 1 && rayon::current_num_threads() > 1 {
            tasks.par_iter().try_for_each(task)
        } else {
            tasks.iter().try_for_each(task)
        }
    }

    /// The tasks for `batch` images: each rectangle in tiles of positions whose unfolded
    /// columns fit [`TILE_BYTES`], then the output channels split (in panels of [`MR`])
    /// until there are enough tasks for the threads.
    fn tasks(&self, batch: usize) -> Vec<Task> {
        let threads = rayon::current_num_threads();
        let wanted = if threads > 1 {
            TASKS_PER_THREAD * threads
        } else {
            1
        };
        let mut tiles = Vec::new();
        for image in 0..batch {
            for (r, rect) in self.rects.iter().enumerate() {
                let depth = (self.channels * rect.taps()).max(1);
                let width = (TILE_BYTES / (4 * depth) / NR * NR).max(NR);
                let positions = rect.positions();
                for first in (0..positions).step_by(width) {
                    tiles.push((image, r, first, width.min(positions - first)));
                }
            }
        }
        let panels = self.out_channels.div_ceil(MR);
        let mut splits = 1;
        while tiles.len() * splits < wanted && panels >= 2 * splits {
            splits *= 2;
        }
        let height = panels.div_ceil(splits) * MR;
        let mut tasks = Vec::with_capacity(tiles.len() * splits);
        for (image, rect, first, n) in tiles {
            for m0 in (0..self.out_channels).step_by(height) {
                tasks.push(Task {
                    image,
                    rect,
                    first,
                    n,
                    rows: m0..(m0 + height).min(self.out_channels),
                });
            }
        }
        tasks
    }

    /// The runs of packed inner steps of `rect`'s live taps, in the order [`Self::unfold`]
    /// writes their rows.
    fn steps(&self, rect: &Rect) -> Vec<Range<usize>> {
        let (kw, c) = (self.axes[1].taps, self.channels);
        let cols = &rect.cols.taps;
        rect.rows
            .taps
            .clone()
            .map(|ky| (ky * kw + cols.start) * c..(ky * kw + cols.end) * c)
            .collect()
    }

    /// Output position (row, column) of the rectangle's `p`-th position.
    fn position(rect: &Rect, p: usize) -> (usize, usize) {
        let width = rect.cols.outputs.len();
        (
            rect.rows.outputs.start + p / width,
            rect.cols.outputs.start + p % width,
        )
    }

    /// Unfolds positions `first..first + n` of `rect` from `image` (`[C, H, W]`) into `col`:
    /// row `(ky, kx, c)` of the live taps holds each position's input at that tap.
    fn unfold(&self, rect: &Rect, image: &[f32], first: usize, col: &mut [f32], n: usize) {
        let [ay, ax] = self.axes;
        let plane = ay.input * ax.input;
        let mut rows = col.chunks_exact_mut(n);
        for ky in rect.rows.taps.clone() {
            for kx in rect.cols.taps.clone() {
                for channel in image.chunks_exact(plane) {
                    let Some(row) = rows.next() else { return };
                    Self::runs(rect, first, n, |j, (y, x), run| {
                        let line = &channel[ay.at(y, ky) * ax.input..][..ax.input];
                        let start = ax.at(x, kx);
                        if ax.stride == 1 {
                            row[j..j + run].copy_from_slice(&line[start..start + run]);
                        } else {
                            let src = line[start..].iter().step_by(ax.stride);
                            row[j..j + run]
                                .iter_mut()
                                .zip(src)
                                .for_each(|(d, &s)| *d = s);
                        }
                    });
                }
            }
        }
    }

    /// Copies the task's positions of `planes` (one image's `[M, OH, OW]` outputs) into
    /// `tile` (`rows × n`).
    fn gather(&self, rect: &Rect, planes: &[f32], t: &Task, tile: &mut [f32]) {
        let (outputs, ow) = (
            self.axes[0].output * self.axes[1].output,
            self.axes[1].output,
        );
        for (m, row) in t.rows.clone().zip(tile.chunks_exact_mut(t.n)) {
            let plane = &planes[m * outputs..][..outputs];
            Self::runs(rect, t.first, t.n, |j, (y, x), run| {
                let at = y * ow + x;
                row[j..j + run].copy_from_slice(&plane[at..at + run]);
            });
        }
    }

    /// Writes `tile` (`rows × n`) to the task's positions of the outputs at `dst` (one
    /// image's `[M, OH, OW]`).
    ///
    /// # Safety
    /// `dst` must hold one image's outputs, the task's positions of which no one else
    /// touches during the call.
    unsafe fn scatter(&self, rect: &Rect, tile: &[f32], t: &Task, dst: *mut f32) {
        let (outputs, ow) = (
            self.axes[0].output * self.axes[1].output,
            self.axes[1].output,
        );
        for (m, row) in t.rows.clone().zip(tile.chunks_exact(t.n)) {
            let plane = dst.wrapping_add(m * outputs);
            Self::runs(rect, t.first, t.n, |j, (y, x), run| {
                let at = y * ow + x;
                // SAFETY: `at + run` lies within the plane (a run of one output row); the
                // caller gives the task these elements alone.
                unsafe { std::ptr::copy_nonoverlapping(row[j..].as_ptr(), plane.add(at), run) };
            });
        }
    }

    /// Calls `f(j, (y, x), run)` for each run of positions `first..first + n` of `rect`
    /// within one output row: `run` positions from the `j`-th of them, the first at output
    /// row `y`, column `x`.
    fn runs(rect: &Rect, first: usize, n: usize, mut f: impl FnMut(usize, (usize, usize), usize)) {
        let mut j = 0;
        while j < n {
            let (y, x) = Self::position(rect, first + j);
            let run = (rect.cols.outputs.end - x).min(n - j);
            f(j, (y, x), run);
            j += run;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(input: usize, taps: usize, stride: usize, dilation: usize, pad: usize) -> Axis {
        let output = (input + 2 * pad - dilation * (taps - 1) - 1) / stride + 1;
        Axis {
            input,
            output,
            taps,
            stride,
            dilation,
            pad,
        }
    }

    #[test]
    fn padding_beyond_any_image_is_declined() {
        let w = Tensor::from_vec(&[1, 1, 3, 3], vec![1.0; 9]).unwrap();
        for pad in [i64::MAX, 1 << 40, 1 << 21] {
            let mut l = Convolution::new(2);
            l.dilations = vec![2, 2];
            l.pads_begin = vec![pad, 2];
            l.pads_end = vec![pad, 2];
            assert!(Regions::new(&l, &[1, 8, 8], &w).is_none(), "padding {pad}");
        }
    }

    #[test]
    fn a_large_dilation_leaves_the_middle_one_tap() {
        let bands = axis(28, 3, 1, 24, 24).bands();
        let want = [(0..4, 1..3), (4..24, 1..2), (24..28, 0..2)];
        assert_eq!(bands.len(), 3);
        for (b, (outputs, taps)) in bands.iter().zip(want) {
            assert_eq!((b.outputs.clone(), b.taps.clone()), (outputs, taps));
        }
    }

    #[test]
    fn padding_wider_than_the_window_leaves_outputs_with_no_taps() {
        let bands = axis(2, 3, 1, 1, 4).bands();
        assert_eq!(bands.first().map(|b| b.taps.clone()), Some(0..0));
        assert_eq!(bands.last().map(|b| b.taps.clone()), Some(0..0));
        let live: usize = bands.iter().map(|b| b.outputs.len() * b.taps.len()).sum();
        assert_eq!(live, 6, "each input is read by three outputs");
    }

    #[test]
    fn strides_band_by_the_positions_they_reach() {
        let a = axis(9, 3, 2, 2, 2);
        for b in a.bands() {
            for o in b.outputs.clone() {
                for k in 0..a.taps {
                    let at = (o * 2 + k * 2) as i64 - 2;
                    assert_eq!(
                        b.taps.contains(&k),
                        (0..9).contains(&at),
                        "output {o} tap {k}"
                    );
                }
            }
        }
    }
}
