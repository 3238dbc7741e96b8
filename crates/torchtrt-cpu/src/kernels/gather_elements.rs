//! GatherElements: each output element reads the data at its own position with the axis
//! coordinate replaced by its index.

use torchtrt_core::layers::GatherElements;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::element_index::ElementIndex;
use crate::dispatch::with_width;
use crate::parallel::for_each_chunk;
use crate::tensor_access::{check_arity, check_dtype, check_output, words, words_mut};

const WHAT: &str = "GatherElements";

struct GatherElementsKernel {
    axis: i64,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &GatherElements,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(GatherElementsKernel {
        axis: layer.axis,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for GatherElementsKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=2, 1)?;
        let (data, idx) = (inputs[0], inputs[1]);
        check_dtype(WHAT, data, self.dtype)?;
        let index = ElementIndex::new(WHAT, data.shape(), idx, self.axis)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, idx.shape())?;
        with_width!(self.dtype, W => {
            let src = words::<W>(data)?;
            for_each_chunk(words_mut::<W>(out)?, |start, chunk| {
                index.for_each(start, start + chunk.len(), |o, at| chunk[o - start] = src[at]);
            });
            Ok(())
        })
    }
}
