//! Reshape and the other copy-only kinds (Flatten, Squeeze, Unsqueeze): the elements are
//! copied unchanged; the runtime gives the output its shape.

use torchtrt_core::layers::Reshape;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::copy_parallel;
use crate::tensor_access::{check_arity, check_dtype};

struct ReshapeKernel {
    what: &'static str,
    dtype: DType,
}

pub(super) fn prepare(_: &Reshape, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(copy_kernel("Reshape", inputs))
}

/// A kernel for the layer kind `what` that copies input 0 into an output of the same
/// element count (any further inputs only decide the shape).
pub(super) fn copy_kernel(what: &'static str, inputs: &[InferInput<'_>]) -> Box<dyn Kernel> {
    Box::new(ReshapeKernel {
        what,
        dtype: inputs[0].dtype,
    })
}

impl Kernel for ReshapeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let what = self.what;
        check_arity(what, inputs, outputs, 1..=2, 1)?;
        let x = inputs[0];
        check_dtype(what, x, self.dtype)?;
        let out = &mut outputs[0];
        if out.dtype() != self.dtype || out.numel() != x.numel() {
            return Err(format!("{what}: cannot reshape {x} into {out}"));
        }
        copy_parallel(x.bytes(), out.bytes_mut());
        Ok(())
    }
}
