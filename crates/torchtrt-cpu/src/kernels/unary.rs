//! Unary element-wise math.

use torchtrt_core::layers::{Unary, UnaryOp};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::map::{map, map_float};
use crate::dispatch::{with_float, with_int};
use crate::scalar::{FloatElem, Int, Real};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Unary";

struct UnaryKernel {
    op: UnaryOp,
    dtype: DType,
}

pub(super) fn prepare(layer: &Unary, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    if !layer.op.accepts(dtype) {
        return Err(format!("{:?} has no CPU kernel for {dtype}", layer.op));
    }
    Ok(Box::new(UnaryKernel {
        op: layer.op,
        dtype,
    }))
}

impl Kernel for UnaryKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        match self.dtype {
            DType::Bool => unary_bool(self.op, elems(x)?, elems_mut(out)?),
            d if d.is_float() => {
                with_float!(d, WHAT, T => unary_float::<T>(self.op, elems(x)?, elems_mut(out)?))
            }
            d => with_int!(d, WHAT, T => unary_int::<T>(self.op, elems(x)?, elems_mut(out)?)),
        }
    }
}

fn unary_float<T: FloatElem>(op: UnaryOp, x: &[T], out: &mut [T]) -> Result<(), String> {
    use UnaryOp as U;
    match op {
        U::Abs => map_float(x, out, Real::abs),
        U::Neg => map_float(x, out, |v: T::C| -v),
        U::Exp => map_float(x, out, Real::exp),
        U::Log => map_float(x, out, Real::ln),
        U::Sqrt => map_float(x, out, Real::sqrt),
        U::Reciprocal => map_float(x, out, |v: T::C| T::C::ONE / v),
        U::Floor => map_float(x, out, Real::floor),
        U::Ceil => map_float(x, out, Real::ceil),
        U::Round => map_float(x, out, Real::round_even),
        U::Sign => map_float(x, out, sign),
        U::Sin => map_float(x, out, Real::sin),
        U::Cos => map_float(x, out, Real::cos),
        U::Tan => map_float(x, out, Real::tan),
        U::Asin => map_float(x, out, Real::asin),
        U::Acos => map_float(x, out, Real::acos),
        U::Atan => map_float(x, out, Real::atan),
        U::Sinh => map_float(x, out, Real::sinh),
        U::Cosh => map_float(x, out, Real::cosh),
        U::Asinh => map_float(x, out, Real::asinh),
        U::Acosh => map_float(x, out, Real::acosh),
        U::Atanh => map_float(x, out, Real::atanh),
        U::Erf => map_float(x, out, Real::erf),
        U::Not => return Err(format!("Not has no CPU kernel for {}", T::DTYPE)),
    }
    Ok(())
}

/// −1, 0 or 1; NaN stays NaN.
fn sign<C: Real>(v: C) -> C {
    if v > C::ZERO {
        C::ONE
    } else if v < C::ZERO {
        -C::ONE
    } else {
        v
    }
}

fn unary_int<T: Int>(op: UnaryOp, x: &[T], out: &mut [T]) -> Result<(), String> {
    match op {
        UnaryOp::Abs => map(x, out, T::wabs),
        UnaryOp::Neg => map(x, out, T::wneg),
        UnaryOp::Sign => map(x, out, |v: T| T::from_i64(v.to_i64().signum())),
        other => return Err(format!("{other:?} has no CPU kernel for {}", T::DTYPE)),
    }
    Ok(())
}

fn unary_bool(op: UnaryOp, x: &[u8], out: &mut [u8]) -> Result<(), String> {
    match op {
        UnaryOp::Not => map(x, out, |v| u8::from(v == 0)),
        other => return Err(format!("{other:?} has no CPU kernel for bool")),
    }
    Ok(())
}
