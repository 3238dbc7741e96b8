//! ScatterElements: a copy of the data, then every update written (or combined) at its
//! own position with the axis coordinate replaced by its index, in row-major order.

use half::{bf16, f16};
use torchtrt_core::layers::{ScatterElements, ScatterReduction};
use torchtrt_core::plugin_api::{DType, Element};
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::copy_parallel;
use super::element_index::ElementIndex;
use crate::dispatch::with_width;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};
use crate::tensor_access::{words, words_mut};

const WHAT: &str = "ScatterElements";

struct ScatterElementsKernel {
    axis: i64,
    reduction: ScatterReduction,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &ScatterElements,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    if layer.reduction != ScatterReduction::None && dtype == DType::Bool {
        return Err(format!(
            "{WHAT} has no {:?} reduction for bool",
            layer.reduction
        ));
    }
    Ok(Box::new(ScatterElementsKernel {
        axis: layer.axis,
        reduction: layer.reduction,
        dtype,
    }))
}

/// An element type updates can be combined into.
pub(super) trait Combine: Element {
    /// `self ⊕ update` for a reduction other than `None`.
    fn combine(self, update: Self, op: ScatterReduction) -> Self;
}

macro_rules! combine_float {
    ($($t:ty: $to:expr, $from:expr);*) => {$(
        impl Combine for $t {
            fn combine(self, update: $t, op: ScatterReduction) -> $t {
                let (a, b) = ($to(self), $to(update));
                $from(match op {
                    ScatterReduction::Add => a + b,
                    ScatterReduction::Mul => a * b,
                    ScatterReduction::Max => if b > a { b } else { a },
                    ScatterReduction::Min => if b < a { b } else { a },
                    ScatterReduction::None => b,
                })
            }
        }
    )*};
}
combine_float!(f32: |v| v, |v| v; f64: |v| v, |v| v;
    f16: f16::to_f32, f16::from_f32; bf16: bf16::to_f32, bf16::from_f32);

macro_rules! combine_int {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn combine(self, update: $t, op: ScatterReduction) -> $t {
                match op {
                    ScatterReduction::Add => self.wrapping_add(update),
                    ScatterReduction::Mul => self.wrapping_mul(update),
                    ScatterReduction::Max => self.max(update),
                    ScatterReduction::Min => self.min(update),
                    ScatterReduction::None => update,
                }
            }
        }
    )*};
}
combine_int!(i64, i32, i16, i8, u8, u16, u32, u64);

fn reduce<T: Combine>(
    index: &ElementIndex,
    updates: &Tensor,
    out: &mut Tensor,
    op: ScatterReduction,
) -> Result<(), String> {
    let upd = elems::<T>(updates)?;
    let dst = elems_mut::<T>(out)?;
    index.for_each(0, upd.len(), |u, at| dst[at] = dst[at].combine(upd[u], op));
    Ok(())
}

impl Kernel for ScatterElementsKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 3..=3, 1)?;
        let (data, idx, updates) = (inputs[0], inputs[1], inputs[2]);
        check_dtype(WHAT, data, self.dtype)?;
        check_dtype(WHAT, updates, self.dtype)?;
        if updates.shape() != idx.shape() {
            return Err(format!(
                "{WHAT}: updates {updates} and indices {idx} must have one shape"
            ));
        }
        let index = ElementIndex::new(WHAT, data.shape(), idx, self.axis)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, data.shape())?;
        copy_parallel(data.bytes(), out.bytes_mut());
        let op = self.reduction;
        match (op, self.dtype) {
            (ScatterReduction::None, dtype) => with_width!(dtype, W => {
                let upd = words::<W>(updates)?;
                let dst = words_mut::<W>(out)?;
                index.for_each(0, upd.len(), |u, at| dst[at] = upd[u]);
                Ok(())
            }),
            (_, DType::F32) => reduce::<f32>(&index, updates, out, op),
            (_, DType::F16) => reduce::<f16>(&index, updates, out, op),
            (_, DType::BF16) => reduce::<bf16>(&index, updates, out, op),
            (_, DType::F64) => reduce::<f64>(&index, updates, out, op),
            (_, DType::I64) => reduce::<i64>(&index, updates, out, op),
            (_, DType::I32) => reduce::<i32>(&index, updates, out, op),
            (_, DType::I16) => reduce::<i16>(&index, updates, out, op),
            (_, DType::I8) => reduce::<i8>(&index, updates, out, op),
            (_, DType::U8) => reduce::<u8>(&index, updates, out, op),
            (_, DType::U16) => reduce::<u16>(&index, updates, out, op),
            (_, DType::U32) => reduce::<u32>(&index, updates, out, op),
            (_, DType::U64) => reduce::<u64>(&index, updates, out, op),
            (_, DType::Bool) => Err(format!("{WHAT} has no {op:?} reduction for bool")),
        }
    }
}
