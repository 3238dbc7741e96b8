//! The separable engine: resamples one plane (the spatial part of one `(n, c)` slice) axis
//! by axis in `f32`: a gather along each contiguous row for the innermost axis, then row
//! combinations for each outer axis.

use std::ops::Range;

use super::element::{Elem, f32_view, with_f32_out};
use super::taps::AxisTaps;

/// How the taps of an output combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The weighted sum.
    Sum,
    /// The maximum, ignoring weights; NaN wins, as in PyTorch's max pooling.
    Max,
}

/// `max(a, b)` where a NaN in either operand wins.
#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    if b > a || b.is_nan() { b } else { a }
}

/// Per-thread scratch buffers, reused across planes.
#[derive(Default)]
pub struct Scratch {
    levels: Vec<Vec<f32>>,
    row: Vec<f32>,
    out: Vec<f32>,
}

/// Resamples the plane `src` (input dims `dims`, outermost first) into `dst`: the outputs
/// `outer` of the outermost axis and every output of the inner axes.
pub fn plane<T: Elem>(
    reduce: Reduce,
    axes: &[AxisTaps],
    src: &[T],
    outer: Range<usize>,
    dst: &mut [T],
    scratch: &mut Scratch,
) {
    let Scratch { levels, row, out } = scratch;
    if levels.len() < axes.len() {
        levels.resize_with(axes.len(), Vec::new);
    }
    with_f32_out(dst, out, |d| {
        resample(reduce, axes, src, outer, d, levels, row);
    });
}

fn resample<T: Elem>(
    reduce: Reduce,
    axes: &[AxisTaps],
    src: &[T],
    outer: Range<usize>,
    dst: &mut [f32],
    levels: &mut [Vec<f32>],
    row: &mut Vec<f32>,
) {
    let Some((axis, inner)) = axes.split_first() else {
        return;
    };
    if inner.is_empty() {
        let span = if axis.identity {
            outer.clone()
        } else {
            axis.input_span(outer.clone())
        };
        let view = f32_view(&src[span.clone()], row);
        row_pass(reduce, axis, view, span.start, outer, dst);
        return;
    }
    let in_block = src.len() / axis.input.max(1);
    let out_block: usize = inner.iter().map(AxisTaps::outputs).product();
    let full = 0..inner[0].outputs();
    if axis.identity {
        for (o, d) in outer.zip(dst.chunks_exact_mut(out_block.max(1))) {
            let s = &src[o * in_block..(o + 1) * in_block];
            resample(reduce, inner, s, full.clone(), d, &mut levels[1..], row);
        }
        return;
    }
    let span = axis.input_span(outer.clone());
    let Some((tmp, rest)) = levels.split_first_mut() else {
        return;
    };
    tmp.clear();
    tmp.resize(span.len() * out_block, 0.0);
    for (r, t) in span.clone().zip(tmp.chunks_exact_mut(out_block.max(1))) {
        let s = &src[r * in_block..(r + 1) * in_block];
        resample(reduce, inner, s, full.clone(), t, rest, row);
    }
    for (o, d) in outer.zip(dst.chunks_exact_mut(out_block.max(1))) {
        block_pass(reduce, axis, tmp, span.start, out_block, o, d);
    }
}

/// Gathers along a contiguous row: `src[0]` is input index `lo`; writes outputs `outputs`.
fn row_pass(
    reduce: Reduce,
    axis: &AxisTaps,
    src: &[f32],
    lo: usize,
    outputs: Range<usize>,
    dst: &mut [f32],
) {
    if axis.identity {
        dst.copy_from_slice(&src[outputs.start - lo..outputs.end - lo]);
        return;
    }
    let n = axis.n;
    let idx = &axis.index[outputs.start * n..outputs.end * n];
    let w = &axis.weight[outputs.start * n..outputs.end * n];
    match (reduce, n) {
        (Reduce::Sum, 1) => {
            for ((d, &i), &wk) in dst.iter_mut().zip(idx).zip(w) {
                *d = wk * src[i - lo];
            }
        }
        (Reduce::Sum, 2) => {
            for ((d, i), wk) in dst
                .iter_mut()
                .zip(idx.chunks_exact(2))
                .zip(w.chunks_exact(2))
            {
                *d = wk[0] * src[i[0] - lo] + wk[1] * src[i[1] - lo];
            }
        }
        (Reduce::Sum, 4) => {
            for ((d, i), wk) in dst
                .iter_mut()
                .zip(idx.chunks_exact(4))
                .zip(w.chunks_exact(4))
            {
                *d = (wk[0] * src[i[0] - lo] + wk[1] * src[i[1] - lo])
                    + (wk[2] * src[i[2] - lo] + wk[3] * src[i[3] - lo]);
            }
        }
        (Reduce::Sum, _) => {
            for ((d, i), wk) in dst
                .iter_mut()
                .zip(idx.chunks_exact(n))
                .zip(w.chunks_exact(n))
            {
                let mut acc = 0.0;
                for (&ik, &wk) in i.iter().zip(wk) {
                    if wk != 0.0 {
                        acc += wk * src[ik - lo];
                    }
                }
                *d = acc;
            }
        }
        (Reduce::Max, _) => {
            for (d, i) in dst.iter_mut().zip(idx.chunks_exact(n)) {
                *d = i
                    .iter()
                    .fold(src[i[0] - lo], |m, &ik| max_nan(m, src[ik - lo]));
            }
        }
    }
}

/// Combines whole blocks of `len` values: `src` holds blocks for input indices `lo…`;
/// writes output `o` into `dst`.
fn block_pass(
    reduce: Reduce,
    axis: &AxisTaps,
    src: &[f32],
    lo: usize,
    len: usize,
    o: usize,
    dst: &mut [f32],
) {
    let n = axis.n;
    let idx = &axis.index[o * n..(o + 1) * n];
    let w = &axis.weight[o * n..(o + 1) * n];
    let block = |i: usize| &src[(i - lo) * len..(i - lo + 1) * len];
    match reduce {
        Reduce::Sum if n == 2 && w[0] != 0.0 && w[1] != 0.0 => {
            let (a, b) = (block(idx[0]), block(idx[1]));
            let (w0, w1) = (w[0], w[1]);
            for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
                *d = w0 * x + w1 * y;
            }
        }
        Reduce::Sum => {
            dst.fill(0.0);
            for (&i, &wk) in idx.iter().zip(w) {
                if wk != 0.0 {
                    for (d, &x) in dst.iter_mut().zip(block(i)) {
                        *d += wk * x;
                    }
                }
            }
        }
        Reduce::Max => {
            dst.copy_from_slice(block(idx[0]));
            for &i in &idx[1..] {
                for (d, &x) in dst.iter_mut().zip(block(i)) {
                    *d = max_nan(*d, x);
                }
            }
        }
    }
}
