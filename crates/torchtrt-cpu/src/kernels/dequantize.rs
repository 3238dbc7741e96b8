//! Dequantization of integers to floats (ONNX `DequantizeLinear`).

use torchtrt_core::layers::Dequantize;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::quantize::Scales;
use crate::dispatch::with_float;
use crate::parallel::for_each_chunk;
use crate::scalar::{FloatElem, Real};
use crate::tensor_access::{check_arity, check_output, elems_mut};

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
        let value: Box<dyn Fn(usize) -> i32 + Sync> = match x.dtype() {
            DType::I8 => {
                let v = x.as_slice::<i8>().map_err(|e| e.to_string())?;
                Box::new(move |i| i32::from(v[i]))
            }
            DType::U8 => {
                let v = x.as_slice::<u8>().map_err(|e| e.to_string())?;
                Box::new(move |i| i32::from(v[i]))
            }
            DType::I16 => {
                let v = x.as_slice::<i16>().map_err(|e| e.to_string())?;
                Box::new(move |i| i32::from(v[i]))
            }
            DType::U16 => {
                let v = x.as_slice::<u16>().map_err(|e| e.to_string())?;
                Box::new(move |i| i32::from(v[i]))
            }
            DType::I32 => {
                let v = x.as_slice::<i32>().map_err(|e| e.to_string())?;
                Box::new(move |i| v[i])
            }
            other => return Err(format!("{WHAT} reads I8, U8, I16, U16 or I32, not {other}")),
        };
        with_float!(self.to, WHAT, T => {
            for_each_chunk(elems_mut::<T>(out)?, |start, chunk| {
                let mut buf = Vec::new();
                T::write(chunk, &mut buf, |dst| {
                    scales.runs(start, dst.len(), |at, len, s, zp| {
                        for (j, o) in dst[at..at + len].iter_mut().enumerate() {
                            let q = (i64::from(value(start + at + j)) - i64::from(zp)) as f32;
                            *o = <T as FloatElem>::C::from_f64(f64::from(q * s));
                        }
                    });
                });
            });
            Ok(())
        })
    }
}
