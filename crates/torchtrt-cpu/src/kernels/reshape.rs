//! Reshape: the elements are copied unchanged; the runtime gives the output its shape.

use torchtrt_core::layers::Reshape;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::copy_parallel;
use crate::tensor_access::{check_arity, check_dtype};

const WHAT: &str = "Reshape";

struct ReshapeKernel {
    dtype: DType,
}

pub(super) fn prepare(_: &Reshape, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ReshapeKernel {
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for ReshapeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=2, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let out = &mut outputs[0];
        if out.dtype() != self.dtype || out.numel() != x.numel() {
            return Err(format!("{WHAT}: cannot reshape {x} into {out}"));
        }
        copy_parallel(x.bytes(), out.bytes_mut());
        Ok(())
    }
}
