//! Cumulative sums along an axis given at run time, inclusive or exclusive, forwards or
//! backwards; floats accumulate in f32 (f64 for f64), integers wrap.

use torchtrt_core::layers::{CumSum, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::scalar_arg::scalar_value;
use crate::dispatch::{with_float, with_int};
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Int, Real};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "CumSum";

struct CumSumKernel {
    layer: CumSum,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &CumSum,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(CumSumKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// The layout of one call: blocks of `len` rows of `inner` elements, summed along `len`.
#[derive(Clone, Copy)]
struct Scan {
    len: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
}

impl Kernel for CumSumKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let axis = scalar_value(WHAT, "the axis input", inputs[1])?;
        let axis = normalize_axis(axis, x.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        let scan = Scan {
            len: x.shape()[axis],
            inner: x.shape()[axis + 1..].iter().product(),
            exclusive: self.layer.exclusive,
            reverse: self.layer.reverse,
        };
        match self.dtype {
            d if d.is_float() => with_float!(d, WHAT, T => {
                let mut buf = Vec::new();
                let xc = T::view(elems::<T>(x)?, &mut buf);
                T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                    cum_sum(xc, oc, scan, <<T as FloatElem>::C as Real>::ZERO, |a, b| a + b)
                });
                Ok(())
            }),
            d => with_int!(d, WHAT, T => {
                cum_sum::<T>(elems(x)?, elems_mut(out)?, scan, T::ZERO, T::wadd);
                Ok(())
            }),
        }
    }
}

fn cum_sum<A: Copy + Send + Sync>(
    x: &[A],
    out: &mut [A],
    scan: Scan,
    zero: A,
    add: impl Fn(A, A) -> A + Sync + Send,
) {
    let Scan { len, inner, .. } = scan;
    let block = len * inner;
    for_each_row(out, block, block, Vec::new, |acc: &mut Vec<A>, o, dst| {
        let src = &x[o * block..(o + 1) * block];
        acc.clear();
        acc.resize(inner, zero);
        let mut step = |r: usize| {
            let (s, d) = (
                &src[r * inner..(r + 1) * inner],
                &mut dst[r * inner..(r + 1) * inner],
            );
            for ((a, o), &v) in acc.iter_mut().zip(d.iter_mut()).zip(s) {
                let next = add(*a, v);
                *o = if scan.exclusive { *a } else { next };
                *a = next;
            }
        };
        if scan.reverse {
            (0..len).rev().for_each(&mut step);
        } else {
            (0..len).for_each(&mut step);
        }
    });
}
