//! Sliding-window geometry over up to three spatial dims, shared by convolution and
//! pooling. 1-D and 2-D windows are stored as 3-D ones with leading dims of size 1.

use std::ops::Range;

/// A window's sizes per spatial dim, outermost first, always three of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// Input extent.
    pub(crate) input: [usize; 3],
    /// Window extent (taps).
    pub(crate) kernel: [usize; 3],
    /// Step between windows.
    pub(crate) stride: [usize; 3],
    /// Step between taps.
    pub(crate) dilation: [usize; 3],
    /// Padding before the input.
    pub(crate) pad_begin: [usize; 3],
    /// Padding after the input.
    pub(crate) pad_end: [usize; 3],
    /// Output extent.
    pub(crate) output: [usize; 3],
}

/// The parameters of a window, one value per spatial dim.
pub(crate) struct WindowParams<'a> {
    /// Window extent.
    pub(crate) kernel: &'a [i64],
    /// Step between windows.
    pub(crate) strides: &'a [i64],
    /// Step between taps.
    pub(crate) dilations: &'a [i64],
    /// Padding before.
    pub(crate) pads_begin: &'a [i64],
    /// Padding after.
    pub(crate) pads_end: &'a [i64],
    /// Round the output extent up; a last window must still start inside the input or the
    /// leading padding.
    pub(crate) ceil_mode: bool,
}

impl Window {
    /// The window of `params` over a spatial shape of 1 to 3 dims.
    pub(crate) fn new(spatial: &[usize], params: &WindowParams<'_>) -> Result<Window, String> {
        let n = spatial.len();
        if !(1..=3).contains(&n) {
            return Err(format!("{n} spatial dims; 1 to 3 are supported"));
        }
        let lists = [
            ("kernel", params.kernel, 1),
            ("strides", params.strides, 1),
            ("dilations", params.dilations, 1),
            ("pads_begin", params.pads_begin, 0),
            ("pads_end", params.pads_end, 0),
        ];
        let mut values = [[1usize; 3]; 5];
        for (slot, (name, list, min)) in values.iter_mut().zip(lists) {
            if list.len() != n {
                return Err(format!(
                    "{name} has {} values for {n} spatial dims",
                    list.len()
                ));
            }
            for (i, &v) in list.iter().enumerate() {
                if v < min {
                    return Err(format!("{name} value {v} is below {min}"));
                }
                slot[3 - n + i] = usize::try_from(v).map_err(|_| format!("{name} value {v}"))?;
            }
        }
        let [kernel, stride, dilation, mut pad_begin, mut pad_end] = values;
        let mut input = [1usize; 3];
        input[3 - n..].copy_from_slice(spatial);
        for i in 0..3 - n {
            pad_begin[i] = 0;
            pad_end[i] = 0;
        }
        let mut output = [1usize; 3];
        for d in 0..3 {
            let span = (dilation[d] * (kernel[d] - 1) + 1) as i64;
            let room = (input[d] + pad_begin[d] + pad_end[d]) as i64 - span;
            if room < 0 {
                return Err(format!(
                    "a window of {span} does not fit spatial dim {} of {} with padding {}+{}",
                    d + n - 3,
                    input[d],
                    pad_begin[d],
                    pad_end[d]
                ));
            }
            let (room, s) = (room as usize, stride[d]);
            let mut o = if params.ceil_mode {
                room.div_ceil(s) + 1
            } else {
                room / s + 1
            };
            if params.ceil_mode && (o - 1) * s >= input[d] + pad_begin[d] {
                o -= 1;
            }
            output[d] = o;
        }
        Ok(Window {
            input,
            kernel,
            stride,
            dilation,
            pad_begin,
            pad_end,
            output,
        })
    }

    /// Elements of one input plane.
    pub(crate) fn input_len(&self) -> usize {
        self.input.iter().product()
    }

    /// Elements of one output plane.
    pub(crate) fn output_len(&self) -> usize {
        self.output.iter().product()
    }

    /// Taps of one window.
    pub(crate) fn kernel_len(&self) -> usize {
        self.kernel.iter().product()
    }

    /// The output extents of the last `n` dims (the real spatial dims).
    pub(crate) fn output_dims(&self, n: usize) -> &[usize] {
        &self.output[3 - n.min(3)..]
    }

    /// True when the window maps each input element to one output (1×1 taps, stride 1, no
    /// padding): im2col would copy the input unchanged.
    pub(crate) fn is_pointwise(&self) -> bool {
        self.kernel == [1; 3]
            && self.stride == [1; 3]
            && self.pad_begin == [0; 3]
            && self.pad_end == [0; 3]
    }

    /// For innermost tap `t`: the outputs along the innermost dim whose input lies inside
    /// the input line (not padding), and the input index of the first of them.
    pub(crate) fn inner_span(&self, t: usize) -> (Range<usize>, usize) {
        let (s, width, n) = (self.stride[2], self.input[2] as isize, self.output[2]);
        let offset = (t * self.dilation[2]) as isize - self.pad_begin[2] as isize;
        let lo = if offset >= 0 {
            0
        } else {
            ((-offset) as usize).div_ceil(s).min(n)
        };
        let hi = if width > offset {
            ((width - offset) as usize).div_ceil(s).min(n)
        } else {
            0
        }
        .max(lo);
        let first = if lo < hi {
            (lo as isize * s as isize + offset) as usize
        } else {
            0
        };
        (lo..hi, first)
    }

    /// The signed input coordinate along `dim` of tap `k` of output `o` (negative or past
    /// the end inside padding).
    #[inline(always)]
    pub(crate) fn coord(&self, dim: usize, o: usize, k: usize) -> isize {
        (o * self.stride[dim] + k * self.dilation[dim]) as isize - self.pad_begin[dim] as isize
    }

    /// The taps of output `o` along `dim` whose coordinates lie in `lo..hi`.
    pub(crate) fn taps_within(&self, dim: usize, o: usize, lo: isize, hi: isize) -> Range<usize> {
        let base = self.coord(dim, o, 0);
        let d = self.dilation[dim] as isize;
        let k = self.kernel[dim];
        let first = if lo > base {
            ((lo - base + d - 1) / d) as usize
        } else {
            0
        };
        let end = if hi > base {
            ((hi - base + d - 1) / d) as usize
        } else {
            0
        };
        first.min(k)..end.min(k).max(first.min(k))
    }

    /// The taps of output `o` along `dim` that read the input (not padding).
    pub(crate) fn valid_taps(&self, dim: usize, o: usize) -> Range<usize> {
        self.taps_within(dim, o, 0, self.input[dim] as isize)
    }

    /// How many taps of output `o` along `dim` lie inside the input or its padding.
    pub(crate) fn padded_taps(&self, dim: usize, o: usize) -> usize {
        let lo = -(self.pad_begin[dim] as isize);
        let hi = (self.input[dim] + self.pad_end[dim]) as isize;
        self.taps_within(dim, o, lo, hi).len()
    }

    /// The input coordinate along `dim` of tap `k` of output `o`, or `None` in padding.
    #[inline(always)]
    pub(crate) fn tap(&self, dim: usize, o: usize, k: usize) -> Option<usize> {
        let c = self.coord(dim, o, k);
        (c >= 0 && (c as usize) < self.input[dim]).then_some(c as usize)
    }
}
