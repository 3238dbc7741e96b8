//! Shape: the input's dims as an i64 tensor; the input's elements are not read.

use torchtrt_core::layers::Shape;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::tensor_access::{check_arity, check_output, elems_mut};

const WHAT: &str = "Shape";

struct ShapeKernel {
    layer: Shape,
}

pub(super) fn prepare(layer: &Shape, _: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ShapeKernel {
        layer: layer.clone(),
    }))
}

impl Kernel for ShapeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let shape = inputs[0].shape();
        let dims = &shape[self.layer.dims(shape.len())];
        let out = &mut outputs[0];
        check_output(WHAT, out, DType::I64, &[dims.len()])?;
        for (o, &d) in elems_mut::<i64>(out)?.iter_mut().zip(dims) {
            *o = d as i64;
        }
        Ok(())
    }
}
