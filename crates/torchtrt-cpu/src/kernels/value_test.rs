//! IsNaN / IsInf: a bool per element telling whether it is NaN or the chosen infinity.

use half::{bf16, f16};
use torchtrt_core::layers::{ValueTest, ValueTestKind};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_chunk;
use crate::tensor_access::{check_arity, check_output, elems, words_mut};

const WHAT: &str = "ValueTest";

struct ValueTestKernel {
    test: ValueTestKind,
}

pub(super) fn prepare(
    layer: &ValueTest,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    if !inputs[0].dtype.is_float() {
        return Err(format!("{WHAT} has no CPU kernel for {}", inputs[0].dtype));
    }
    Ok(Box::new(ValueTestKernel { test: layer.test }))
}

fn run<T: Copy + Sync>(
    test: ValueTestKind,
    x: &[T],
    out: &mut [u8],
    wide: impl Fn(T) -> f64 + Sync + Send,
) {
    for_each_chunk(out, |start, chunk| {
        for (o, &v) in chunk.iter_mut().zip(&x[start..]) {
            *o = u8::from(test.test(wide(v)));
        }
    });
}

impl Kernel for ValueTestKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        let out = &mut outputs[0];
        check_output(WHAT, out, DType::Bool, x.shape())?;
        let dst = words_mut::<u8>(out)?;
        let t = self.test;
        match x.dtype() {
            DType::F32 => run(t, elems::<f32>(x)?, dst, f64::from),
            DType::F64 => run(t, elems::<f64>(x)?, dst, |v| v),
            DType::F16 => run(t, elems::<f16>(x)?, dst, f16::to_f64),
            DType::BF16 => run(t, elems::<bf16>(x)?, dst, bf16::to_f64),
            other => return Err(format!("{WHAT} has no CPU kernel for {other}")),
        }
        Ok(())
    }
}
