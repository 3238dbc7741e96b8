//! Concatenation along an axis.

use torchtrt_core::layers::{Concat, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_row;
use crate::tensor_access::{check_dtype, check_output};

const WHAT: &str = "Concat";

struct ConcatKernel {
    axis: i64,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Concat,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ConcatKernel {
        axis: layer.axis,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for ConcatKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let [out] = outputs else {
            return Err(format!("{WHAT} has one output, got {}", outputs.len()));
        };
        let Some(first) = inputs.first() else {
            return Err(format!("{WHAT} needs at least one input"));
        };
        let axis = normalize_axis(self.axis, first.rank()).map_err(|e| format!("{WHAT}: {e}"))?;
        let mut shape = first.shape().to_vec();
        shape[axis] = 0;
        for x in inputs {
            check_dtype(WHAT, x, self.dtype)?;
            let agrees = x.rank() == shape.len()
                && x.shape()
                    .iter()
                    .zip(&shape)
                    .enumerate()
                    .all(|(d, (a, b))| d == axis || a == b);
            if !agrees {
                return Err(format!(
                    "{WHAT}: cannot join {x} to {first} along axis {axis}"
                ));
            }
            shape[axis] += x.shape()[axis];
        }
        check_output(WHAT, out, self.dtype, &shape)?;
        let elem = self.dtype.size();
        let inner: usize = shape[axis + 1..].iter().product::<usize>() * elem;
        let blocks: Vec<usize> = inputs.iter().map(|x| x.shape()[axis] * inner).collect();
        let row: usize = blocks.iter().sum();
        for_each_row(
            out.bytes_mut(),
            row,
            row,
            || (),
            |_, o, dst| {
                let mut at = 0;
                for (x, &len) in inputs.iter().zip(&blocks) {
                    dst[at..at + len].copy_from_slice(&x.bytes()[o * len..(o + 1) * len]);
                    at += len;
                }
            },
        );
        Ok(())
    }
}
