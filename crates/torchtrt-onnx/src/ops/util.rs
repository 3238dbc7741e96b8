//! Helpers shared by converters.

use torchtrt_core::layers::Cast;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Tensor, TensorId};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;

/// A scalar constant of `dtype` holding `v`.
pub(crate) fn scalar(ctx: &mut Ctx<'_>, node: &Node<'_>, dtype: DType, v: f64) -> Result<TensorId> {
    let t = match dtype {
        DType::F32 => Tensor::scalar(v as f32),
        DType::F16 => Tensor::scalar(half::f16::from_f64(v)),
        DType::BF16 => Tensor::scalar(half::bf16::from_f64(v)),
        DType::F64 => Tensor::scalar(v),
        DType::I64 => Tensor::scalar(v as i64),
        DType::I32 => Tensor::scalar(v as i32),
        DType::I16 => Tensor::scalar(v as i16),
        DType::I8 => Tensor::scalar(v as i8),
        DType::U8 => Tensor::scalar(v as u8),
        DType::U16 => Tensor::scalar(v as u16),
        DType::U32 => Tensor::scalar(v as u32),
        DType::U64 => Tensor::scalar(v as u64),
        DType::Bool => Tensor::from_bytes(DType::Bool, &[], &[(v != 0.0) as u8])?,
    };
    ctx.constant(node, t)
}

/// `t` cast to `dtype` (no layer when it already has it).
pub(crate) fn cast_to(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    t: TensorId,
    dtype: DType,
) -> Result<TensorId> {
    if ctx.ty(t).dtype == dtype {
        Ok(t)
    } else {
        ctx.add(node, Cast { to: dtype }, &[t])
    }
}

/// A 1-D i64 constant.
pub(crate) fn i64s(ctx: &mut Ctx<'_>, node: &Node<'_>, v: &[i64]) -> Result<TensorId> {
    ctx.constant(node, Tensor::from_slice(&[v.len()], v)?)
}

/// An integer list given as attribute `attr` (older opsets) or as input `input` (newer),
/// whose value must be known at import time.
pub(crate) fn ints_attr_or_input(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
    attr: &str,
    input: usize,
) -> Result<Option<Vec<i64>>> {
    if let Some(v) = node.ints(attr)? {
        return Ok(Some(v));
    }
    match ctx.opt_input(node, input)? {
        None => Ok(None),
        Some(t) => ctx
            .value_i64s(t)
            .map(Some)
            .ok_or_else(|| node.err(format!("input {input} (`{attr}`) must be a constant"))),
    }
}
