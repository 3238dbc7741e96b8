//! Strided slices (ONNX `Slice`; parameters from the layer or from inputs 1..=4; steps may
//! be negative).

use torchtrt_core::layers::Slice;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::strided_copy;
use crate::dispatch::with_width;
use crate::strided::Strided;
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, words, words_mut,
};

const WHAT: &str = "Slice";

struct SliceKernel {
    layer: Slice,
    dtype: DType,
}

pub(super) fn prepare(layer: &Slice, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(SliceKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for SliceKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=5, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let dims = self
            .layer
            .with_values(&inputs[1..])
            .and_then(|layer| layer.resolve(x.shape()))
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let shape: Vec<usize> = dims.iter().map(|d| d.2).collect();
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        if out.numel() == 0 {
            return Ok(());
        }
        let in_strides = contiguous_strides(x.shape());
        let mut base = 0isize;
        let mut strides = Vec::with_capacity(dims.len());
        for (&(start, step, _), &stride) in dims.iter().zip(&in_strides) {
            base += start as isize * stride as isize;
            strides.push([step as isize * stride as isize]);
        }
        let walk = Strided::new(&shape, &strides, [base]);
        with_width!(self.dtype, W => {
            strided_copy::<W>(&walk, words(x)?, words_mut(out)?);
            Ok(())
        })
    }
}
