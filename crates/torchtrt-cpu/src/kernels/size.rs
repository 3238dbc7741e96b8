//! Size: the input's element count as an i64 scalar; the input's elements are not read.

use torchtrt_core::layers::Size;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::tensor_access::{check_arity, check_output, elems_mut};

const WHAT: &str = "Size";

struct SizeKernel;

pub(super) fn prepare(_: &Size, _: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(SizeKernel))
}

impl Kernel for SizeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let n = inputs[0].numel() as i64;
        let out = &mut outputs[0];
        check_output(WHAT, out, DType::I64, &[])?;
        elems_mut::<i64>(out)?.fill(n);
        Ok(())
    }
}
