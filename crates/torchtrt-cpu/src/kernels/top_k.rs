//! TopK along one axis: the `k` best elements of each line in order, ties by lower index,
//! NaN ranking above every number.

use std::cmp::Ordering;

use rayon::prelude::*;
use torchtrt_core::layers::{TopK, normalize_axis};
use torchtrt_core::plugin_api::{DType, Element};
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::scalar_arg::scalar_value;
use crate::dispatch::{with_float, with_int};
use crate::parallel::MIN_TASK;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "TopK";

struct TopKKernel {
    layer: TopK,
    dtype: DType,
}

pub(super) fn prepare(layer: &TopK, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(TopKKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// The layout of one call: blocks of `len` rows of `inner` elements; `k` chosen per column.
#[derive(Clone, Copy)]
struct Select {
    len: usize,
    inner: usize,
    k: usize,
    largest: bool,
}

impl Kernel for TopKKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 2)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let axis = normalize_axis(self.layer.axis, x.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let len = x.shape()[axis];
        let k = scalar_value(WHAT, "k", inputs[1])?;
        let k = usize::try_from(k)
            .ok()
            .filter(|&k| k <= len)
            .ok_or_else(|| {
                format!("{WHAT}: k = {k} is outside 0..={len} for axis {axis} of {x}")
            })?;
        let mut shape = x.shape().to_vec();
        shape[axis] = k;
        let (values, indices) = outputs.split_at_mut(1);
        check_output(WHAT, &values[0], self.dtype, &shape)?;
        check_output(WHAT, &indices[0], DType::I64, &shape)?;
        let select = Select {
            len,
            inner: x.shape()[axis + 1..].iter().product(),
            k,
            largest: self.layer.largest,
        };
        let idx = elems_mut::<i64>(&mut indices[0])?;
        match self.dtype {
            d if d.is_float() => with_float!(d, WHAT, T => {
                top_k::<T>(elems(x)?, elems_mut(&mut values[0])?, idx, select);
                Ok(())
            }),
            d => with_int!(d, WHAT, T => {
                top_k::<T>(elems(x)?, elems_mut(&mut values[0])?, idx, select);
                Ok(())
            }),
        }
    }
}

fn top_k<T: Element + PartialOrd>(x: &[T], values: &mut [T], indices: &mut [i64], s: Select) {
    let Select {
        len,
        inner,
        k,
        largest,
    } = s;
    let (block, out_block) = (len * inner, k * inner);
    if out_block == 0 {
        return;
    }
    let order = |a: &(T, usize), b: &(T, usize)| -> Ordering {
        let by_value = nan_largest(&a.0, &b.0);
        let by_value = if largest {
            by_value.reverse()
        } else {
            by_value
        };
        by_value.then(a.1.cmp(&b.1))
    };
    values
        .par_chunks_mut(out_block)
        .zip(indices.par_chunks_mut(out_block))
        .enumerate()
        .with_min_len((MIN_TASK / block.max(1)).max(1))
        .for_each_init(Vec::new, |line: &mut Vec<(T, usize)>, (o, (vals, idx))| {
            let src = &x[o * block..(o + 1) * block];
            for i in 0..inner {
                line.clear();
                line.extend((0..len).map(|r| (src[r * inner + i], r)));
                if k < len {
                    line.select_nth_unstable_by(k - 1, order);
                    line.truncate(k);
                }
                line.sort_unstable_by(order);
                for (j, &(v, r)) in line.iter().enumerate() {
                    vals[j * inner + i] = v;
                    idx[j * inner + i] = r as i64;
                }
            }
        });
}

/// A total order on values in which a NaN is larger than every number and equal to
/// another NaN.
fn nan_largest<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    let nan = |x: &T| x.partial_cmp(x).is_none();
    match (nan(a), nan(b)) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(b).unwrap_or(Ordering::Equal),
    }
}
