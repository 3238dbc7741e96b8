//! ConstantOfShape: a tensor of the shape input 0 holds, filled with one value.

use torchtrt_core::layers::{ConstantOfShape, int_vector};
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::fill::fill_parallel;
use crate::dispatch::with_width;
use crate::tensor_access::{check_arity, check_output, words, words_mut};

const WHAT: &str = "ConstantOfShape";

struct ConstantOfShapeKernel {
    value: Tensor,
}

pub(super) fn prepare(
    layer: &ConstantOfShape,
    _: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ConstantOfShapeKernel {
        value: layer.value_tensor()?,
    }))
}

impl Kernel for ConstantOfShapeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let dims = int_vector("the shape input", inputs[0]).map_err(|e| format!("{WHAT}: {e}"))?;
        let shape = dims
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("{WHAT}: negative dim in {dims:?}"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.value.dtype(), &shape)?;
        with_width!(self.value.dtype(), W => {
            let value = *words::<W>(&self.value)?
                .first()
                .ok_or_else(|| format!("{WHAT}: the fill value is empty"))?;
            fill_parallel(words_mut::<W>(out)?, value);
            Ok(())
        })
    }
}
