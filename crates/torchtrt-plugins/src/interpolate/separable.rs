//! The separable engine: resamples one plane (the spatial part of one `(n, c)` slice) axis
//! by axis in `f32`: a gather along each contiguous row for the innermost axis, then row
//! combinations for each outer axis.

use std::ops::Range;

use super::element::{f32_view, store};
use super::poly;
use super::taps::AxisTaps;
use crate::kernels::float::Float;
use crate::kernels::simd::{Madd, multiversion};

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
    rows: Vec<f32>,
}

/// Outputs computed per store: small enough to stay in L1.
const CHUNK: usize = 2048;

/// The tables of a separable resampling or pooling, and the order its passes run in.
pub struct SeparablePlan {
    reduce: Reduce,
    axes: Vec<AxisTaps>,
    /// When the outer axes shrink the plane: the tables with the innermost axis replaced by
    /// the identity, so outer passes run first on whole input rows and the (gathering)
    /// innermost pass last, on fewer rows.
    inner_last: Option<Vec<AxisTaps>>,
}

impl SeparablePlan {
    /// A plan over `axes` (outermost first) combining taps by `reduce`.
    pub fn new(reduce: Reduce, axes: Vec<AxisTaps>) -> SeparablePlan {
        let outer_in: usize = axes.iter().rev().skip(1).map(|a| a.input).product();
        let outer_out: usize = axes.iter().rev().skip(1).map(AxisTaps::outputs).product();
        let inner_last = match axes.split_last() {
            Some((last, outer)) if !outer.is_empty() && outer_out < outer_in => {
                let mut z = outer.to_vec();
                z.push(AxisTaps::identity(last.input));
                Some(z)
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
        let (Some(z_axes), Some(last)) = (&self.inner_last, self.axes.last()) else {
            plane(self.reduce, &self.axes, src, outer, dst, scratch);
            return;
        };
        let Scratch {
            levels,
            row,
            out,
            rows,
        } = scratch;
        if levels.len() < z_axes.len() {
            levels.resize_with(z_axes.len(), Vec::new);
        }
        let mid: usize = z_axes[1..].iter().map(AxisTaps::outputs).product();
        let width = last.input;
        let block = mid / width.max(1) * last.outputs();
        emit(dst, outer, block, out, |part, buf| {
            let z = sized(rows, part.len() * mid);
            resample(self.reduce, z_axes, src, part, z, levels, row);
            rows_pass(self.reduce, last, z, width, 0, 0..last.outputs(), buf);
        });
    }
}

/// Resamples the plane `src` into `dst`: the outputs `outer` of the outermost axis and
/// every output of the inner axes. Inner axes are resampled once into scratch, then the
/// outermost pass writes the output.
fn plane<T: Float>(
    reduce: Reduce,
    axes: &[AxisTaps],
    src: &[T],
    outer: Range<usize>,
    dst: &mut [T],
    scratch: &mut Scratch,
) {
    let Scratch {
        levels, row, out, ..
    } = scratch;
    if levels.len() < axes.len() {
        levels.resize_with(axes.len(), Vec::new);
    }
    let Some((axis, inner)) = axes.split_first() else {
        return;
    };
    let Some((tmp, rest)) = levels.split_first_mut() else {
        return;
    };
    if inner.is_empty() {
        let span = if axis.identity {
            outer.clone()
        } else {
            axis.input_span(outer.clone())
        };
        let view = f32_view(&src[span.clone()], row);
        emit(dst, outer, 1, out, |part, buf| {
            rows_pass(reduce, axis, view, span.len(), span.start, part, buf);
        });
        return;
    }
    let in_block = src.len() / axis.input.max(1);
    let out_block: usize = inner.iter().map(AxisTaps::outputs).product();
    if axis.identity {
        emit(dst, outer, out_block, out, |part, buf| {
            let s = &src[part.start * in_block..part.end * in_block];
            slab(reduce, inner, s, in_block, buf, rest, row);
        });
        return;
    }
    let span = axis.input_span(outer.clone());
    let tmp = sized(tmp, span.len() * out_block);
    let s = &src[span.start * in_block..span.end * in_block];
    slab(reduce, inner, s, in_block, tmp, rest, row);
    emit(dst, outer, out_block, out, |part, buf| {
        blocks(reduce, axis, tmp, span.start, out_block, part, buf);
    });
}

/// Runs `f(outputs, values)` for the outputs `outer` (blocks of `block` values) of `dst`, a
/// few blocks at a time through the L1-sized `buf`, then stores them into `dst`. (Copying
/// out of L1 in bulk writes large outputs faster than the kernels' scattered stores, even
/// for `f32`.)
fn emit<T: Float>(
    dst: &mut [T],
    outer: Range<usize>,
    block: usize,
    buf: &mut Vec<f32>,
    mut f: impl FnMut(Range<usize>, &mut [f32]),
) {
    let rows = (CHUNK / block.max(1)).max(1);
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

fn resample<T: Float>(
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
        rows_pass(reduce, axis, view, span.len(), span.start, outer, dst);
        return;
    }
    let in_block = src.len() / axis.input.max(1);
    let out_block: usize = inner.iter().map(AxisTaps::outputs).product();
    let Some((tmp, rest)) = levels.split_first_mut() else {
        return;
    };
    if axis.identity {
        let s = &src[outer.start * in_block..outer.end * in_block];
        slab(reduce, inner, s, in_block, dst, rest, row);
        return;
    }
    let span = axis.input_span(outer.clone());
    let s = &src[span.start * in_block..span.end * in_block];
    if let [only] = inner
        && only.identity
    {
        let view = f32_view(s, row);
        blocks(reduce, axis, view, span.start, out_block, outer, dst);
        return;
    }
    let tmp = sized(tmp, span.len() * out_block);
    slab(reduce, inner, s, in_block, tmp, rest, row);
    blocks(reduce, axis, tmp, span.start, out_block, outer, dst);
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

multiversion! {
    /// Resamples rows of `in_len` inputs (input index `lo` first) along the innermost axis,
    /// writing outputs `outputs` of each row. A periodic interior goes through the
    /// vectorised kernels of [`poly`], the rest element by element.
    fn rows_pass<M: Madd>(
        reduce: Reduce,
        axis: &AxisTaps,
        src: &[f32],
        in_len: usize,
        lo: usize,
        outputs: Range<usize>,
        dst: &mut [f32],
    ) {
        let (in_len, width) = (in_len.max(1), outputs.len().max(1));
        if axis.identity {
            for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
                d.copy_from_slice(&s[outputs.start - lo..outputs.end - lo]);
            }
            return;
        }
        let at = |r: &Range<usize>| r.start - outputs.start..r.end - outputs.start;
        if let Some(p) = &axis.periodic {
            let (head, mid, _) = p.split(outputs.clone());
            let done = match reduce {
                _ if mid.is_empty() => 0,
                Reduce::Sum => {
                    poly::sum_rows::<M>(p, src, in_len, lo, outputs.clone(), mid.clone(), dst)
                }
                Reduce::Max => poly::max_rows(p, src, in_len, lo, outputs.clone(), mid.clone(), dst),
            };
            if done > 0 {
                let tail = mid.start + done..outputs.end;
                for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
                    gather::<M>(reduce, axis, s, lo, head.clone(), &mut d[at(&head)]);
                    gather::<M>(reduce, axis, s, lo, tail.clone(), &mut d[at(&tail)]);
                }
                return;
            }
        }
        for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
            gather::<M>(reduce, axis, s, lo, outputs.clone(), d);
        }
    }
}

/// The element-by-element row kernel. Sums run tap by tap in order, as the periodic
/// kernels do, so both give identical results on finite data; weight-0 taps are skipped
/// (an infinite input under a window's padding tap stays out of an average).
#[inline(always)]
fn gather<M: Madd>(
    reduce: Reduce,
    axis: &AxisTaps,
    src: &[f32],
    lo: usize,
    outputs: Range<usize>,
    dst: &mut [f32],
) {
    let n = axis.n;
    let idx = &axis.index[outputs.start * n..outputs.end * n];
    let w = &axis.weight[outputs.start * n..outputs.end * n];
    match (reduce, n) {
        (Reduce::Sum, 2) => {
            for ((d, i), wk) in dst
                .iter_mut()
                .zip(idx.chunks_exact(2))
                .zip(w.chunks_exact(2))
            {
                *d = M::madd(wk[1], src[i[1] - lo], wk[0] * src[i[0] - lo]);
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
                        acc = M::madd(wk, src[ik - lo], acc);
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

multiversion! {
    /// Combines whole blocks of `len` values along an outer axis: `src` holds the blocks of
    /// input indices `lo…`; writes the blocks of outputs `outputs` into `dst`.
    fn blocks<M: Madd>(
        reduce: Reduce,
        axis: &AxisTaps,
        src: &[f32],
        lo: usize,
        len: usize,
        outputs: Range<usize>,
        dst: &mut [f32],
    ) {
        for (o, d) in outputs.zip(dst.chunks_exact_mut(len.max(1))) {
            block::<M>(reduce, axis, src, lo, len, o, d);
        }
    }
}

#[inline(always)]
fn block<M: Madd>(
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
            fused2::<M>(dst, true, block(idx[0]), w[0], block(idx[1]), w[1]);
        }
        Reduce::Sum => {
            let mut taps = idx.iter().zip(w).filter(|t| *t.1 != 0.0);
            let mut init = true;
            loop {
                let mut group = [(&[][..], 0.0f32); 4];
                let mut g = 0;
                for (&i, &wk) in taps.by_ref().take(4) {
                    group[g] = (block(i), wk);
                    g += 1;
                }
                let [(a, wa), (b, wb), (c, wc), (d, wd)] = group;
                match g {
                    0 if init => dst.fill(0.0),
                    1 => fused1::<M>(dst, init, a, wa),
                    2 => fused2::<M>(dst, init, a, wa, b, wb),
                    3 => fused3::<M>(dst, init, a, wa, b, wb, c, wc),
                    4 => fused4::<M>(dst, init, a, wa, b, wb, c, wc, d, wd),
                    _ => {}
                }
                if g < 4 {
                    break;
                }
                init = false;
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

/// Defines `dst = Σ w·b` (added to `dst` unless `init`) over a fixed number of blocks, tap
/// by tap in order; each block is its own local slice of `dst`'s length, so the loop has no
/// bounds checks and vectorises.
macro_rules! fused {
    ($name:ident: $b0:ident $w0:ident $(, $b:ident $w:ident)*) => {
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        fn $name<M: Madd>(
            dst: &mut [f32],
            init: bool,
            $b0: &[f32],
            $w0: f32,
            $($b: &[f32], $w: f32),*
        ) {
            let n = dst.len();
            let $b0 = &$b0[..n];
            $(let $b = &$b[..n];)*
            if init {
                for j in 0..n {
                    let acc = $w0 * $b0[j];
                    $(let acc = M::madd($w, $b[j], acc);)*
                    dst[j] = acc;
                }
            } else {
                for j in 0..n {
                    let acc = M::madd($w0, $b0[j], dst[j]);
                    $(let acc = M::madd($w, $b[j], acc);)*
                    dst[j] = acc;
                }
            }
        }
    };
}
fused!(fused1: a wa);
fused!(fused2: a wa, b wb);
fused!(fused3: a wa, b wb, c wc);
fused!(fused4: a wa, b wb, c wc, d wd);
