//! Axis permutation.

use torchtrt_core::layers::Transpose;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::strided_copy;
use crate::dispatch::with_width;
use crate::strided::Strided;
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, words, words_mut,
};

const WHAT: &str = "Transpose";

struct TransposeKernel {
    perm: Vec<usize>,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Transpose,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(TransposeKernel {
        perm: layer.perm.clone(),
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for TransposeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        if self.perm.len() != x.rank() || self.perm.iter().any(|&p| p >= x.rank()) {
            return Err(format!(
                "{WHAT}: {:?} does not permute the dims of {x}",
                self.perm
            ));
        }
        let shape: Vec<usize> = self.perm.iter().map(|&p| x.shape()[p]).collect();
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let in_strides = contiguous_strides(x.shape());
        let strides: Vec<[isize; 1]> = self
            .perm
            .iter()
            .map(|&p| [in_strides[p] as isize])
            .collect();
        let walk = Strided::new(&shape, &strides, [0]);
        with_width!(self.dtype, W => {
            strided_copy::<W>(&walk, words(x)?, words_mut(out)?);
            Ok(())
        })
    }
}
