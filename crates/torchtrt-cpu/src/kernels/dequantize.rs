//! Dequantization of integers to floats (ONNX `DequantizeLinear`).

use torchtrt_core::layers::Dequantize;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::quantize::Scales;
use crate::dispatch::with_float;
use crate::parallel::for_each_chunk;
use crate::scalar::{FloatElem, Real};
use crate::simd::multiversion;
use crate::tensor_access::{check_arity, check_output, elems, elems_mut};

const WHAT: &str = "Dequantize";

struct DequantizeKernel {
    axis: i64,
    to: DType,
}

pub(super) fn prepare(
    layer: &Dequantize,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(DequantizeKernel {
        axis: layer.axis,
        to: inputs[1].dtype,
    }))
}

impl Kernel for DequantizeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=3, 1)?;
        let x = inputs[0];
        let scales = Scales::new(WHAT, self.axis, inputs)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.to, x.shape())?;
        with_float!(self.to, WHAT, T => {
            let out = elems_mut::<T>(out)?;
            match x.dtype() {
                DType::I8 => dequantize_all(elems::<i8>(x)?, &scales, out),
                DType::U8 => dequantize_all(elems::<u8>(x)?, &scales, out),
                DType::I16 => dequantize_all(elems::<i16>(x)?, &scales, out),
                DType::U16 => dequantize_all(elems::<u16>(x)?, &scales, out),
                DType::I32 => dequantize_all(elems::<i32>(x)?, &scales, out),
                other => {
                    return Err(format!("{WHAT} reads I8, U8, I16, U16 or I32, not {other}"));
                }
            }
            Ok(())
        })
    }
}

/// An integer type `Dequantize` reads.
trait Integer: Copy + Sync {
    /// The value as f32 (rounded to nearest for `i32`s beyond 2²⁴, as ONNX computes).
    fn to_f32(self) -> f32;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Integer for $t {
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
        }
    )*};
}
integer!(i8, u8, i16, u16, i32);

/// `out = (x − zero_point) · scale` over every run of one scale, in parallel chunks.
fn dequantize_all<Q: Integer, T: FloatElem>(x: &[Q], scales: &Scales, out: &mut [T]) {
    for_each_chunk(out, |start, chunk| {
        let mut buf = Vec::new();
        T::write(chunk, &mut buf, |dst| {
            scales.runs(start, dst.len(), |at, len, s, zp| {
                let src = &x[start + at..start + at + len];
                dequantize_run(src, &mut dst[at..at + len], s, zp);
            });
        });
    });
}

multiversion! {
    /// `dst = (src − zp) · s` in f32, as ONNX's reference computes it.
    fn dequantize_run<Q: Integer, C: Real>(src: &[Q], dst: &mut [C], s: f32, zp: i32) {
        let zp = zp as f32;
        for (o, &v) in dst.iter_mut().zip(src) {
            *o = C::from_f64(f64::from((v.to_f32() - zp) * s));
        }
    }
}
