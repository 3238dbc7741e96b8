//! The image a stride-1 convolution's packed product reads in place instead of im2col
//! ([`Grid`]): the input zero-padded, so that every tap of every output row is one
//! contiguous run. The product computes rows of `width` positions (the padded rows), of
//! which the last `width - valid` are no output.
//!
//! Strided layers are not read this way: their taps would come from the stride's phases
//! of the input, spread over more cache than an im2col tile, and measured no faster
//! (resnet50's 3×3 stride-2 layers 0–4 % slower, a 3-channel stem 38 % slower).
//!
//! [`Grid`]: crate::linalg::Grid

use rayon::prelude::*;

use crate::linalg::Window;

/// Largest share of a grid row's positions that may be no output (`1 / JUNK`): those are
/// computed and dropped, which costs less than unfolding the columns with im2col while they
/// are few (a 3×3 window on rows of 27 outputs wastes 2 of 29).
const JUNK: usize = 8;

/// Most elements of a padded plane per element of the input plane (plus [`SLACK`]): the
/// padded image is allocated whole, so padding far larger than the input (which im2col
/// handles a tile at a time) does not take this path.
const GROWTH: usize = 4;

/// Padded-plane elements allowed beyond [`GROWTH`] times the input plane.
const SLACK: usize = 4096;

/// The grid of a planar stride-1 window: `rows` × `width` positions per input channel,
/// `valid` outputs per row and `len` positions from the first output to the last.
pub(super) struct GridShape {
    /// Rows of the padded input.
    pub(super) rows: usize,
    /// Positions per row.
    pub(super) width: usize,
    /// Outputs per row.
    pub(super) valid: usize,
    /// Grid positions computed per image.
    pub(super) len: usize,
}

impl GridShape {
    /// The grid of `win`, when it is planar (1-D or 2-D), of stride 1, wastes at most
    /// `1 / JUNK` of each row, and its padded plane is at most [`GROWTH`] times the input's.
    pub(super) fn of(win: &Window) -> Option<GridShape> {
        let planar = win.input[0] == 1 && win.kernel[0] == 1 && win.output[0] == 1;
        if !planar || win.stride != [1; 3] {
            return None;
        }
        let padded = |d: usize| win.input[d] + win.pad_begin[d] + win.pad_end[d];
        let (rows, width, valid) = (padded(1), padded(2), win.output[2]);
        let plane = rows.checked_mul(width)?;
        if valid > width
            || JUNK * (width - valid) > width
            || plane > GROWTH * win.input_len() + SLACK
        {
            return None;
        }
        Some(GridShape {
            rows,
            width,
            valid,
            len: (win.output[1] - 1) * width + valid,
        })
    }

    /// Elements of one input channel's padded plane.
    pub(super) fn plane(&self) -> usize {
        self.rows * self.width
    }

    /// Fills `offsets` with the offset of each of the `channels · taps` rows of the
    /// product (input channel, then window position) in the image of [`GridShape::image`].
    pub(super) fn taps(&self, win: &Window, channels: usize, offsets: &mut Vec<usize>) {
        offsets.clear();
        for c in 0..channels {
            for kh in 0..win.kernel[1] {
                for kw in 0..win.kernel[2] {
                    let at = kh * win.dilation[1] * self.width + kw * win.dilation[2];
                    offsets.push(c * self.plane() + at);
                }
            }
        }
    }

    /// `x`'s `planes` planes zero-padded in `buf`, or `x` itself when the window does not
    /// pad.
    pub(super) fn image<'a>(
        &self,
        x: &'a [f32],
        planes: usize,
        win: &Window,
        buf: &'a mut Vec<f32>,
    ) -> &'a [f32] {
        if win.pad_begin == [0; 3] && win.pad_end == [0; 3] {
            return x;
        }
        let (h, w) = (win.input[1], win.input[2]);
        let (top, left) = (win.pad_begin[1], win.pad_begin[2]);
        let plane = self.plane();
        buf.resize(planes * plane, 0.0);
        buf[..planes * plane]
            .par_chunks_mut(plane)
            .zip(x.par_chunks(h * w))
            .for_each(|(dst, src)| {
                let (head, body) = dst.split_at_mut(top * self.width);
                head.fill(0.0);
                let (body, tail) = body.split_at_mut(h * self.width);
                tail.fill(0.0);
                for (row, line) in body.chunks_mut(self.width).zip(src.chunks(w)) {
                    row[..left].fill(0.0);
                    row[left..left + w].copy_from_slice(line);
                    row[left + w..].fill(0.0);
                }
            });
        &buf[..planes * plane]
    }
}
