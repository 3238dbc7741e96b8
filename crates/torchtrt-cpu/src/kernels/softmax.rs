//! Softmax and log-softmax along one axis, stabilised by subtracting the maximum.
//!
//! Along the last axis (rows of consecutive values) each row takes three vectorised passes
//! while it is in cache. Along any other axis the rows of `len` values are interleaved
//! `inner` apart, so blocks of columns are processed together, vectorised along the inner
//! axis, with the maxima and sums of a block in a small scratch buffer.

use torchtrt_core::layers::{Softmax, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::reduce::fold::{
    ExpSumOf, Fold, MaxOf, SHORT_RUN, SumOf, fold_rows, fold_run, fold_runs4, map_fold_run,
};
use super::reduce::short_rows;
use crate::dispatch::with_float;
use crate::parallel::{MIN_TASK, for_each_rows};
use crate::scalar::{FloatElem, Real, as_f32, as_f32_mut};
use crate::scratch::Kept;
use crate::simd::multiversion;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Softmax";

/// Columns processed together along a non-last axis.
const BLOCK: usize = 512;

struct SoftmaxKernel {
    axis: i64,
    log: bool,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Softmax,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(SoftmaxKernel {
        axis: layer.axis,
        log: layer.log,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for SoftmaxKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        let axis = normalize_axis(self.axis, x.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let len = x.shape()[axis];
        let inner: usize = x.shape()[axis + 1..].iter().product();
        let log = self.log;
        with_float!(self.dtype, WHAT, T => {
            let mut buf = Vec::new();
            let xc = T::view(elems::<T>(x)?, &mut buf);
            T::write(elems_mut(out)?, &mut Vec::new(), |oc| softmax(xc, oc, len, inner, log));
            Ok(())
        })
    }
}

/// Softmax over blocks of `len × inner` elements, along `len`.
fn softmax<C: Real>(x: &[C], out: &mut [C], len: usize, inner: usize, log: bool) {
    let block = len * inner;
    if block == 0 {
        return;
    }
    if inner == 1 {
        if let (Some(x), Some(out)) = (as_f32(x), as_f32_mut(out))
            && short_rows::takes(len)
        {
            for_each_rows(out, len, 4 * len, |first, dst| {
                let src = &x[first * len..first * len + dst.len()];
                let taken = short_rows::softmax(src, len, log, dst);
                debug_assert!(taken, "short rows refused {len}");
            });
            return;
        }
        for_each_rows(out, len, 4 * len, |first, dst| {
            last_axis_rows(x, first, len, log, dst)
        });
        return;
    }
    let outer = out.len() / block;
    let threads = rayon::current_num_threads();
    if outer >= threads * 2 || block * outer <= MIN_TASK {
        for_each_rows(out, block, 4 * block, |first, dst| {
            let mut scratch = Kept::<Vec<C>>::take("softmax columns");
            for (j, dst) in dst.chunks_exact_mut(block).enumerate() {
                let src = &x[(first + j) * block..(first + j + 1) * block];
                for j0 in (0..inner).step_by(BLOCK) {
                    let rows = Interleaved {
                        data: &mut *dst,
                        inner,
                        j0,
                        width: BLOCK.min(inner - j0),
                    };
                    columns(src, inner, j0, rows, log, &mut scratch);
                }
            }
        });
        return;
    }
    split_columns(x, out, len, inner, log);
}

/// Softmax along a non-last axis with few outer blocks: every block of columns of every
/// outer block is a task of its own, writing through its own row slices.
fn split_columns<C: Real>(x: &[C], out: &mut [C], len: usize, inner: usize, log: bool) {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads();
    let outer = out.len() / (len * inner);
    let wanted = (threads * 4).div_ceil(outer);
    let width = inner
        .div_ceil(wanted)
        .next_multiple_of(64)
        .clamp(64, BLOCK)
        .min(inner);
    let mut items: Vec<(usize, usize, Vec<&mut [C]>)> = Vec::new();
    for (o, chunk) in out.chunks_exact_mut(len * inner).enumerate() {
        let first = items.len();
        for j0 in (0..inner).step_by(width) {
            items.push((o, j0, Vec::with_capacity(len)));
        }
        for row in chunk.chunks_exact_mut(inner) {
            for (k, piece) in row.chunks_mut(width).enumerate() {
                items[first + k].2.push(piece);
            }
        }
    }
    items.par_iter_mut().for_each(|(o, j0, rows)| {
        let src = &x[*o * len * inner..(*o + 1) * len * inner];
        let mut scratch = Kept::<Vec<C>>::take("softmax columns");
        columns(src, inner, *j0, Sliced(rows), log, &mut scratch);
    });
}

/// The output rows of one block of columns.
trait BlockRows<C> {
    /// Columns in the block.
    fn width(&self) -> usize;
    /// The block's part of row `r`.
    fn row(&mut self, r: usize) -> &mut [C];
}

/// A block of columns of one contiguous `len × inner` output block.
struct Interleaved<'a, C> {
    data: &'a mut [C],
    inner: usize,
    j0: usize,
    width: usize,
}

impl<C> BlockRows<C> for Interleaved<'_, C> {
    #[inline(always)]
    fn width(&self) -> usize {
        self.width
    }
    #[inline(always)]
    fn row(&mut self, r: usize) -> &mut [C] {
        let at = r * self.inner + self.j0;
        &mut self.data[at..at + self.width]
    }
}

/// A block of columns given as one slice per row.
struct Sliced<'a, 'b, C>(&'a mut [&'b mut [C]]);

impl<C> BlockRows<C> for Sliced<'_, '_, C> {
    #[inline(always)]
    fn width(&self) -> usize {
        self.0.first().map_or(0, |r| r.len())
    }
    #[inline(always)]
    fn row(&mut self, r: usize) -> &mut [C] {
        self.0[r]
    }
}

multiversion! {
    /// Softmax of the contiguous rows `first..` of `len` values, written back to back. Short
    /// rows (a 64-wide last axis) take their maxima four at a time: four independent
    /// compare-select chains instead of one row's chain and its horizontal merge.
    fn last_axis_rows<C: Real>(x: &[C], first: usize, len: usize, log: bool, dst: &mut [C]) {
        let row = |j: usize| &x[(first + j) * len..(first + j + 1) * len];
        let quads = if len < SHORT_RUN { dst.len() / (4 * len) } else { 0 };
        let (head, rest) = dst.split_at_mut(quads * 4 * len);
        for (q, d) in head.chunks_exact_mut(4 * len).enumerate() {
            let j = 4 * q;
            let m = fold_runs4(MaxOf, [row(j), row(j + 1), row(j + 2), row(j + 3)]);
            for (k, d) in d.chunks_exact_mut(len).enumerate() {
                softmax_row::<C, M>(row(j + k), m[k], log, d);
            }
        }
        for (k, d) in rest.chunks_exact_mut(len).enumerate() {
            let src = row(4 * quads + k);
            softmax_row::<C, M>(src, fold_run(MaxOf, MaxOf.init(), src), log, d);
        }
    }
}

/// Softmax (or log-softmax) of one row `src` whose maximum is `m`, into `d`.
#[inline(always)]
fn softmax_row<C: Real, M: crate::simd::Madd>(src: &[C], m: C, log: bool, d: &mut [C]) {
    if log {
        let shift = m + fold_run(ExpSumOf::<C, M>::new(m), C::ZERO, src).ln();
        for (d, &v) in d.iter_mut().zip(src) {
            *d = v - shift;
        }
    } else {
        let sum = map_fold_run(SumOf { mean: false }, C::ZERO, src, d, |v| {
            (v - m).exp_with::<M>()
        });
        let inv = C::ONE / sum;
        for d in d.iter_mut() {
            *d = *d * inv;
        }
    }
}

multiversion! {
    /// Softmax of columns `j0..j0 + width` of one `len × inner` block `src` (rows `inner`
    /// apart), written to `rows`; `scratch` holds the columns' maxima and sums.
    fn columns<C: Real, R: BlockRows<C>>(
        src: &[C],
        inner: usize,
        j0: usize,
        rows: R,
        log: bool,
        scratch: &mut Vec<C>,
    ) {
        let mut rows = rows;
        let width = rows.width();
        let len = src.len() / inner;
        let row = |r: usize| &src[r * inner + j0..r * inner + j0 + width];
        scratch.clear();
        scratch.resize(2 * width, C::NEG_INFINITY);
        let (maxima, sums) = scratch.split_at_mut(width);
        fold_rows(MaxOf, maxima, (0..len).map(row));
        sums.fill(C::ZERO);
        for r in 0..len {
            let d = rows.row(r);
            for (((d, s), &m), &v) in d.iter_mut().zip(sums.iter_mut()).zip(maxima.iter()).zip(row(r)) {
                let e = (v - m).exp_with::<M>();
                *s = *s + e;
                *d = e;
            }
        }
        if log {
            for (s, &m) in sums.iter_mut().zip(maxima.iter()) {
                *s = m + s.ln();
            }
            for r in 0..len {
                for ((d, &shift), &v) in rows.row(r).iter_mut().zip(sums.iter()).zip(row(r)) {
                    *d = v - shift;
                }
            }
        } else {
            for s in sums.iter_mut() {
                *s = C::ONE / *s;
            }
            for r in 0..len {
                for (d, &inv) in rows.row(r).iter_mut().zip(sums.iter()) {
                    *d = *d * inv;
                }
            }
        }
    }
}
