//! Parameters of normalization converters: float constants of a given dtype folded at
//! import time, and per-channel vectors laid out to broadcast against `[N, C, …]`.

use torchtrt_core::layers::Unsqueeze;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Tensor, TensorId};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;

/// A constant of the float `dtype` and `shape` holding `values`, rounded from f64.
pub(crate) fn float_const(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    dtype: DType,
    shape: &[usize],
    values: &[f64],
) -> Result<TensorId> {
    let t = match dtype {
        DType::F32 => Tensor::from_vec(shape, values.iter().map(|&v| v as f32).collect())?,
        DType::F64 => Tensor::from_slice(shape, values)?,
        DType::F16 => Tensor::from_vec(
            shape,
            values.iter().map(|&v| half::f16::from_f64(v)).collect(),
        )?,
        DType::BF16 => Tensor::from_vec(
            shape,
            values.iter().map(|&v| half::bf16::from_f64(v)).collect(),
        )?,
        other => return Err(node.err(format!("expected a floating-point input, got {other}"))),
    };
    ctx.constant(node, t)
}

/// `t`, whose dims line up with the input's from axis 1 (`[C]` or `[C, D1, …]`), with
/// trailing size-1 dims added so it broadcasts against an input of rank `rank`.
pub(crate) fn per_channel(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    t: TensorId,
    rank: usize,
) -> Result<TensorId> {
    let own = ctx.rank(t);
    if own == 0 || own + 1 > rank {
        return Err(node.err(format!(
            "a per-channel parameter of rank {own} does not fit an input of rank {rank}"
        )));
    }
    if own + 1 == rank {
        return Ok(t);
    }
    let axes = (own as i64..rank as i64 - 1).collect();
    ctx.add(node, Unsqueeze { axes }, &[t])
}
