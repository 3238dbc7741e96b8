//! The separable engine: resamples one plane (the spatial part of one `(n, c)` slice) axis
//! by axis in `f32`. Inner axes are resampled first into scratch, innermost by a gather along
//! contiguous rows; the outermost pass then writes the output a few rows at a time. When
//! the outer axes shrink the plane (pools, downsampling) the order flips: outer passes run
//! on whole input rows and the innermost gather last, on fewer rows.

use std::ops::Range;

use super::element::{as_f32_mut, f32_view, store};
use super::passes::{Reduce, blocks, rows_pass};
use super::taps::AxisTaps;
use crate::kernels::float::Float;

/// Outputs computed per store: small enough to stay in L1. (Copying them out in bulk writes
/// large outputs faster than the kernels' scattered stores, even for `f32`.)
const CHUNK: usize = 2048;

/// Per-thread scratch buffers, reused across planes.
#[derive(Default)]
pub struct Scratch {
    levels: Vec<Vec<f32>>,
    row: Vec<f32>,
    out: Vec<f32>,
    rows: Vec<f32>,
}

impl Scratch {
    /// Two of the buffers, for other kernels sharing the scratch.
    pub fn buffers(&mut self) -> (&mut Vec<f32>, &mut Vec<f32>) {
        (&mut self.row, &mut self.out)
    }
}

/// The tables of a separable resampling or pooling, and the order its passes run in.
pub struct SeparablePlan {
    reduce: Reduce,
    axes: Vec<AxisTaps>,
    /// When the outer axes shrink the plane: the tables with the innermost axis replaced by
    /// the identity, for the outer passes that run first.
    inner_last: Option<Vec<AxisTaps>>,
}

impl SeparablePlan {
    /// A plan over `axes` (outermost first) combining taps by `reduce`.
    pub fn new(reduce: Reduce, axes: Vec<AxisTaps>) -> SeparablePlan {
        let inner_last = match axes.split_last() {
            Some((last, outer)) if !outer.is_empty() => {
                let outer_in: usize = outer.iter().map(|a| a.input).product();
                let outer_out: usize = outer.iter().map(AxisTaps::outputs).product();
                (outer_out < outer_in).then(|| {
                    let mut z = outer.to_vec();
                    z.push(AxisTaps::identity(last.input));
                    z
                })
            }
            _ => None,
        };
        SeparablePlan {
            reduce,
            axes,
            inner_last,
        }
    }

    /// Resamples the plane `src` into `dst`: the outputs `outer` of the outermost axis and
    /// every output of the inner axes.
    pub fn plane<T: Float>(
        &self,
        src: &[T],
        outer: Range<usize>,
        dst: &mut [T],
        scratch: &mut Scratch,
    ) {
        let Scratch {
            levels,
            row,
            out,
            rows,
        } = scratch;
        let depth = self.axes.len();
        if levels.len() < depth {
            levels.resize_with(depth, Vec::new);
        }
        let reduce = self.reduce;
        let (Some(z_axes), Some(last)) = (&self.inner_last, self.axes.last()) else {
            let block = self.axes.iter().skip(1).map(AxisTaps::outputs).product();
            if let Some(mut last) = prepare(reduce, &self.axes, src, outer.clone(), levels, row) {
                emit(dst, outer, block, out, |part, buf| last.run(part, buf));
            }
            return;
        };
        let mid: usize = z_axes[1..].iter().map(AxisTaps::outputs).product();
        let width = last.input;
        let block = mid / width.max(1) * last.outputs();
        emit(dst, outer, block, out, |part, buf| {
            let z = sized(rows, part.len() * mid);
            resample(reduce, z_axes, src, part, z, levels, row);
            rows_pass(reduce, last, z, width, 0, 0..last.outputs(), buf);
        });
    }
}

/// The outermost pass of a resampling, with everything it reads prepared.
enum LastPass<'a, T> {
    /// One axis: gather from the row `src` (input indices `lo…`).
    Rows {
        reduce: Reduce,
        axis: &'a AxisTaps,
        src: &'a [f32],
        lo: usize,
    },
    /// An identity outer axis: resample each of its slices along the inner axes.
    Slabs {
        reduce: Reduce,
        inner: &'a [AxisTaps],
        src: &'a [T],
        in_block: usize,
        levels: &'a mut [Vec<f32>],
        row: &'a mut Vec<f32>,
    },
    /// Combine blocks of `len` values of `src` (input indices `lo…`) along `axis`.
    Blocks {
        reduce: Reduce,
        axis: &'a AxisTaps,
        src: &'a [f32],
        lo: usize,
        len: usize,
    },
}

impl<T: Float> LastPass<'_, T> {
    /// Writes the outputs `part` of the outermost axis (all inner outputs of each) to `dst`.
    fn run(&mut self, part: Range<usize>, dst: &mut [f32]) {
        match self {
            LastPass::Rows {
                reduce,
                axis,
                src,
                lo,
            } => rows_pass(*reduce, axis, src, src.len(), *lo, part, dst),
            LastPass::Slabs {
                reduce,
                inner,
                src,
                in_block,
                levels,
                row,
            } => {
                let s = &src[part.start * *in_block..part.end * *in_block];
                slab(*reduce, inner, s, *in_block, dst, levels, row);
            }
            LastPass::Blocks {
                reduce,
                axis,
                src,
                lo,
                len,
            } => blocks(*reduce, axis, src, *lo, *len, part, dst),
        }
    }
}

/// Resamples the inner axes of the plane `src` into scratch for the outputs `outer` of the
/// outermost axis, and returns the outermost pass that finishes them (`None` without axes).
fn prepare<'a, T: Float>(
    reduce: Reduce,
    axes: &'a [AxisTaps],
    src: &'a [T],
    outer: Range<usize>,
    levels: &'a mut [Vec<f32>],
    row: &'a mut Vec<f32>,
) -> Option<LastPass<'a, T>> {
    let (axis, inner) = axes.split_first()?;
    if inner.is_empty() {
        let span = if axis.identity {
            outer
        } else {
            axis.input_span(outer)
        };
        return Some(LastPass::Rows {
            reduce,
            axis,
            src: f32_view(&src[span.clone()], row),
            lo: span.start,
        });
    }
    let in_block = src.len() / axis.input.max(1);
    let (tmp, rest) = levels.split_first_mut()?;
    if axis.identity {
        return Some(LastPass::Slabs {
            reduce,
            inner,
            src,
            in_block,
            levels: rest,
            row,
        });
    }
    let out_block: usize = inner.iter().map(AxisTaps::outputs).product();
    let span = axis.input_span(outer);
    let s = &src[span.start * in_block..span.end * in_block];
    let src = if let [only] = inner
        && only.identity
    {
        f32_view(s, row)
    } else {
        let tmp = sized(tmp, span.len() * out_block);
        slab(reduce, inner, s, in_block, tmp, rest, row);
        tmp
    };
    Some(LastPass::Blocks {
        reduce,
        axis,
        src,
        lo: span.start,
        len: out_block,
    })
}

/// Resamples the plane `src`: outputs `outer` of the outermost axis into `dst`.
fn resample<T: Float>(
    reduce: Reduce,
    axes: &[AxisTaps],
    src: &[T],
    outer: Range<usize>,
    dst: &mut [f32],
    levels: &mut [Vec<f32>],
    row: &mut Vec<f32>,
) {
    if let Some(mut last) = prepare(reduce, axes, src, outer.clone(), levels, row) {
        last.run(outer, dst);
    }
}

/// Resamples consecutive slices of `in_block` inputs along the axes `axes`, all outputs
/// of each, into consecutive blocks of `dst`.
fn slab<T: Float>(
    reduce: Reduce,
    axes: &[AxisTaps],
    src: &[T],
    in_block: usize,
    dst: &mut [f32],
    levels: &mut [Vec<f32>],
    row: &mut Vec<f32>,
) {
    let Some(first) = axes.first() else {
        return;
    };
    if axes.len() == 1 {
        let view = f32_view(src, row);
        rows_pass(reduce, first, view, in_block, 0, 0..first.outputs(), dst);
        return;
    }
    let out_block: usize = axes.iter().map(AxisTaps::outputs).product();
    for (s, d) in src
        .chunks_exact(in_block.max(1))
        .zip(dst.chunks_exact_mut(out_block.max(1)))
    {
        resample(reduce, axes, s, 0..first.outputs(), d, levels, row);
    }
}

/// Runs `f(outputs, values)` for the outputs `outer` (blocks of `block` values) of `dst`, a
/// few blocks at a time: straight into `dst` for `f32`, else through the L1-sized `buf`
/// and narrowed into `dst`.
fn emit<T: Float>(
    dst: &mut [T],
    outer: Range<usize>,
    block: usize,
    buf: &mut Vec<f32>,
    mut f: impl FnMut(Range<usize>, &mut [f32]),
) {
    let rows = (CHUNK / block.max(1)).max(1);
    if let Some(dst) = as_f32_mut(dst) {
        for (o, d) in (outer.start..outer.end)
            .step_by(rows)
            .zip(dst.chunks_mut(rows * block.max(1)))
        {
            f(o..(o + rows).min(outer.end), d);
        }
        return;
    }
    for (o, d) in (outer.start..outer.end)
        .step_by(rows)
        .zip(dst.chunks_mut(rows * block.max(1)))
    {
        let values = sized(buf, d.len());
        f(o..(o + rows).min(outer.end), values);
        store(values, d);
    }
}

/// The first `len` elements of `buf`, growing it when needed.
fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}
