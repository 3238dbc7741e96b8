//! Softmax and log-softmax along one axis, stabilised by subtracting the maximum.

use torchtrt_core::layers::{Softmax, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_float;
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Real, lane_max, lane_sum};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Softmax";

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
    for_each_row(
        out,
        block,
        block * 4,
        Vec::new,
        |acc: &mut Vec<C>, o, dst| {
            let src = &x[o * block..(o + 1) * block];
            if inner == 1 {
                softmax_row(src, dst, log);
            } else {
                softmax_strided(src, dst, inner, acc, log);
            }
        },
    );
}

/// Softmax of one contiguous row.
fn softmax_row<C: Real>(src: &[C], dst: &mut [C], log: bool) {
    let m = lane_max(src);
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = (v - m).exp();
    }
    let sum = lane_sum(dst);
    if log {
        let shift = m + sum.ln();
        for (d, &v) in dst.iter_mut().zip(src) {
            *d = v - shift;
        }
    } else {
        let inv = C::ONE / sum;
        for d in dst.iter_mut() {
            *d = *d * inv;
        }
    }
}

/// Softmax of `inner` interleaved rows (element `i` of row `r` at `r · inner + i`).
fn softmax_strided<C: Real>(src: &[C], dst: &mut [C], inner: usize, acc: &mut Vec<C>, log: bool) {
    acc.clear();
    acc.resize(2 * inner, C::NEG_INFINITY);
    let (maxima, sums) = acc.split_at_mut(inner);
    for row in src.chunks_exact(inner) {
        for (m, &v) in maxima.iter_mut().zip(row) {
            if v > *m {
                *m = v;
            }
        }
    }
    sums.fill(C::ZERO);
    for (drow, row) in dst.chunks_exact_mut(inner).zip(src.chunks_exact(inner)) {
        for (((d, s), &m), &v) in drow
            .iter_mut()
            .zip(sums.iter_mut())
            .zip(maxima.iter())
            .zip(row)
        {
            *d = (v - m).exp();
            *s = *s + *d;
        }
    }
    if log {
        for (s, &m) in sums.iter_mut().zip(maxima.iter()) {
            *s = m + s.ln();
        }
        for (drow, row) in dst.chunks_exact_mut(inner).zip(src.chunks_exact(inner)) {
            for ((d, &shift), &v) in drow.iter_mut().zip(sums.iter()).zip(row) {
                *d = v - shift;
            }
        }
    } else {
        for s in sums.iter_mut() {
            *s = C::ONE / *s;
        }
        for drow in dst.chunks_exact_mut(inner) {
            for (d, &inv) in drow.iter_mut().zip(sums.iter()) {
                *d = *d * inv;
            }
        }
    }
}
