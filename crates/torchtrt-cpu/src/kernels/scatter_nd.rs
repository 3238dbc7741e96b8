//! ScatterND: a copy of the data, then each update slice written (or combined) at the
//! slice its index tuple addresses, in row-major order.

use half::{bf16, f16};
use torchtrt_core::layers::{ScatterNd, ScatterReduction};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::copy_parallel;
use super::gather_nd::Tuples;
use super::scatter_elements::Combine;
use crate::dispatch::with_width;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};
use crate::tensor_access::{words, words_mut};

const WHAT: &str = "ScatterNd";

struct ScatterNdKernel {
    reduction: ScatterReduction,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &ScatterNd,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    if layer.reduction != ScatterReduction::None && dtype == DType::Bool {
        return Err(format!(
            "{WHAT} has no {:?} reduction for bool",
            layer.reduction
        ));
    }
    Ok(Box::new(ScatterNdKernel {
        reduction: layer.reduction,
        dtype,
    }))
}

fn reduce<T: Combine>(
    tuples: &Tuples,
    updates: &Tensor,
    out: &mut Tensor,
    op: ScatterReduction,
) -> Result<(), String> {
    let upd = elems::<T>(updates)?;
    let dst = elems_mut::<T>(out)?;
    let n = tuples.slice;
    for (src, &at) in upd.chunks_exact(n.max(1)).zip(&tuples.offsets) {
        for (d, &u) in dst[at..at + n].iter_mut().zip(src) {
            *d = d.combine(u, op);
        }
    }
    Ok(())
}

impl Kernel for ScatterNdKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 3..=3, 1)?;
        let (data, idx, updates) = (inputs[0], inputs[1], inputs[2]);
        check_dtype(WHAT, data, self.dtype)?;
        check_dtype(WHAT, updates, self.dtype)?;
        let tuples = Tuples::new(WHAT, data.shape(), idx, 0)?;
        if updates.numel() != tuples.offsets.len() * tuples.slice {
            return Err(format!(
                "{WHAT}: updates {updates} do not hold {} slices of {} elements",
                tuples.offsets.len(),
                tuples.slice
            ));
        }
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, data.shape())?;
        copy_parallel(data.bytes(), out.bytes_mut());
        let op = self.reduction;
        let n = tuples.slice;
        match (op, self.dtype) {
            (ScatterReduction::None, dtype) => with_width!(dtype, W => {
                let upd = words::<W>(updates)?;
                let dst = words_mut::<W>(out)?;
                for (src, &at) in upd.chunks_exact(n.max(1)).zip(&tuples.offsets) {
                    dst[at..at + n].copy_from_slice(src);
                }
                Ok(())
            }),
            (_, DType::F32) => reduce::<f32>(&tuples, updates, out, op),
            (_, DType::F16) => reduce::<f16>(&tuples, updates, out, op),
            (_, DType::BF16) => reduce::<bf16>(&tuples, updates, out, op),
            (_, DType::F64) => reduce::<f64>(&tuples, updates, out, op),
            (_, DType::I64) => reduce::<i64>(&tuples, updates, out, op),
            (_, DType::I32) => reduce::<i32>(&tuples, updates, out, op),
            (_, DType::I16) => reduce::<i16>(&tuples, updates, out, op),
            (_, DType::I8) => reduce::<i8>(&tuples, updates, out, op),
            (_, DType::U8) => reduce::<u8>(&tuples, updates, out, op),
            (_, DType::U16) => reduce::<u16>(&tuples, updates, out, op),
            (_, DType::U32) => reduce::<u32>(&tuples, updates, out, op),
            (_, DType::U64) => reduce::<u64>(&tuples, updates, out, op),
            (_, DType::Bool) => Err(format!("{WHAT} has no {op:?} reduction for bool")),
        }
    }
}
