//! ArgMax / ArgMin along one axis, with numpy's NaN rule (a NaN wins) and first or last
//! index among ties.

use std::cmp::Ordering;

use torchtrt_core::layers::{ArgReduce, normalize_axis};
use torchtrt_core::plugin_api::{DType, Element};
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::{with_float, with_int};
use crate::parallel::for_each_row;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "ArgReduce";

struct ArgReduceKernel {
    layer: ArgReduce,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &ArgReduce,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ArgReduceKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// How `v` ranks against `best`: `Greater` when it is strictly better (larger for `max`,
/// smaller otherwise), a NaN being better than any number and equal to another NaN.
#[inline(always)]
fn rank<T: PartialOrd>(v: &T, best: &T, max: bool) -> Ordering {
    let nan = |x: &T| x.partial_cmp(x).is_none();
    match (nan(v), nan(best)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ if max => v.partial_cmp(best).unwrap_or(Ordering::Equal),
        _ => best.partial_cmp(v).unwrap_or(Ordering::Equal),
    }
}

impl Kernel for ArgReduceKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let axis = normalize_axis(self.layer.axis, x.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let mut shape = x.shape().to_vec();
        let len = shape[axis];
        if self.layer.keep_dims {
            shape[axis] = 1;
        } else {
            shape.remove(axis);
        }
        let out = &mut outputs[0];
        check_output(WHAT, out, DType::I64, &shape)?;
        if len == 0 && out.numel() > 0 {
            return Err(format!("{WHAT}: axis {axis} of {x} is empty"));
        }
        let inner: usize = x.shape()[axis + 1..].iter().product();
        let l = &self.layer;
        let (max, last) = (l.max, l.select_last_index);
        let dst = elems_mut::<i64>(out)?;
        match self.dtype {
            d if d.is_float() => with_float!(d, WHAT, T => {
                arg_reduce::<T>(elems(x)?, dst, len, inner, max, last);
                Ok(())
            }),
            d => with_int!(d, WHAT, T => {
                arg_reduce::<T>(elems(x)?, dst, len, inner, max, last);
                Ok(())
            }),
        }
    }
}

/// Over blocks of `len × inner` elements: for each of the `inner` columns, the position
/// of its best element.
fn arg_reduce<T: Element + PartialOrd>(
    x: &[T],
    out: &mut [i64],
    len: usize,
    inner: usize,
    max: bool,
    last: bool,
) {
    let block = len * inner;
    let wins = |o: Ordering| o == Ordering::Greater || (last && o == Ordering::Equal);
    for_each_row(out, inner, block, Vec::new, |best: &mut Vec<T>, o, dst| {
        let src = &x[o * block..(o + 1) * block];
        let mut rows = src.chunks_exact(inner);
        let Some(first) = rows.next() else { return };
        best.clear();
        best.extend_from_slice(first);
        dst.fill(0);
        for (i, row) in rows.enumerate() {
            for ((b, d), v) in best.iter_mut().zip(dst.iter_mut()).zip(row) {
                if wins(rank(v, b, max)) {
                    *b = *v;
                    *d = i as i64 + 1;
                }
            }
        }
    });
}
