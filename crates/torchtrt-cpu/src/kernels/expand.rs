//! Expand: the input broadcast to the numpy broadcast of its shape and a shape tensor.

use torchtrt_core::layers::{Expand, int_vector};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::strided_copy;
use crate::dispatch::with_width;
use crate::strided::{Strided, broadcast_shape, broadcast_strides};
use crate::tensor_access::{check_arity, check_dtype, check_output, words, words_mut};

const WHAT: &str = "Expand";

struct ExpandKernel {
    dtype: DType,
}

pub(super) fn prepare(_: &Expand, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ExpandKernel {
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for ExpandKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let dims = int_vector("the shape input", inputs[1]).map_err(|e| format!("{WHAT}: {e}"))?;
        let target = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("{WHAT}: negative dim in {dims:?}"))?;
        let shape = broadcast_shape(x.shape(), &target).map_err(|e| format!("{WHAT}: {e}"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let strides: Vec<[isize; 1]> = broadcast_strides(x.shape(), &shape)?
            .into_iter()
            .map(|s| [s])
            .collect();
        let walk = Strided::new(&shape, &strides, [0]);
        with_width!(self.dtype, W => {
            strided_copy::<W>(&walk, words(x)?, words_mut(out)?);
            Ok(())
        })
    }
}
