//! NonZero: the coordinates of every non-zero element, one row per axis.

use torchtrt_core::layers::{NonZero, count_non_zero};
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::tensor_access::{check_arity, check_output, contiguous_strides, elems_mut};

const WHAT: &str = "NonZero";

struct NonZeroKernel;

pub(super) fn prepare(_: &NonZero, _: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(NonZeroKernel))
}

/// Whether each element of `t` is non-zero (NaN is; −0.0 is not).
fn flags(t: &Tensor) -> Vec<bool> {
    if t.dtype().is_float() {
        return t.to_f64_vec().iter().map(|&v| v != 0.0).collect();
    }
    t.bytes()
        .chunks_exact(t.dtype().size())
        .map(|e| e.iter().any(|&b| b != 0))
        .collect()
}

impl Kernel for NonZeroKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        let count = count_non_zero(x);
        let rank = x.rank();
        let out = &mut outputs[0];
        check_output(
            WHAT,
            out,
            torchtrt_core::plugin_api::DType::I64,
            &[rank, count],
        )?;
        let strides = contiguous_strides(x.shape());
        let dst = elems_mut::<i64>(out)?;
        let hits = flags(x).into_iter().enumerate().filter(|&(_, f)| f);
        for (j, (flat, _)) in hits.enumerate() {
            let mut rest = flat;
            for (d, &s) in strides.iter().enumerate() {
                dst[d * count + j] = (rest / s.max(1)) as i64;
                rest %= s.max(1);
            }
        }
        Ok(())
    }
}
