//! Helpers shared by converters.

use torchtrt_core::layers::{Cast, normalize_axis};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Tensor, TensorId};

use crate::ctx::{Ctx, Sym};
use crate::dtype::dtype_from_torch;
use crate::error::Result;
use crate::node::Node;
use crate::schema::{Argument, SymBoolArg, SymIntArgFloat};

/// A 0-d constant of `dtype` holding `v`.
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
        DType::Bool => Tensor::from_bytes(DType::Bool, &[], &[u8::from(v != 0.0)])?,
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
    if ctx.dtype(t) == dtype {
        Ok(t)
    } else {
        ctx.add(node, Cast { to: dtype }, &[t])
    }
}

/// A 1-D i64 constant.
pub(crate) fn i64s(ctx: &mut Ctx<'_>, node: &Node<'_>, v: &[i64]) -> Result<TensorId> {
    ctx.constant(node, Tensor::from_slice(&[v.len()], v)?)
}

/// The dtype the program declares for output `i` of `node`.
pub(crate) fn out_dtype(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> Option<DType> {
    let name = match node.raw.outputs.get(i)? {
        Argument::Tensor(n) => n,
        _ => return None,
    };
    dtype_from_torch(ctx.meta(name)?.dtype).ok()
}

/// torch's promotion of two tensor dtypes: floats over integers over bool, wider over
/// narrower, f16 with bf16 to f32.
pub(crate) fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    let rank = |d: DType| match d {
        Bool => 0,
        U8 | I8 => 1,
        I16 | U16 => 2,
        I32 | U32 => 3,
        I64 | U64 => 4,
        F16 | BF16 => 5,
        F32 => 6,
        F64 => 7,
    };
    if matches!((a, b), (F16, BF16) | (BF16, F16)) {
        return F32;
    }
    if rank(a) >= rank(b) { a } else { b }
}

/// Argument `name` as a tensor of `dtype`: a tensor argument cast to it, or a scalar
/// (int, float, bool, SymInt, SymFloat) as a 0-d constant or run-time value.
pub(crate) fn operand(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    name: &str,
    dtype: DType,
) -> Result<TensorId> {
    let t = match node.arg(name) {
        Some(Argument::Tensor(_)) => ctx.tensor(node, name)?,
        Some(Argument::Float(v)) | Some(Argument::SymFloat(SymIntArgFloat::Float(v))) => {
            return scalar(ctx, node, dtype, *v);
        }
        Some(Argument::Bool(b)) | Some(Argument::SymBool(SymBoolArg::Bool(b))) => {
            return scalar(ctx, node, dtype, f64::from(u8::from(*b)));
        }
        Some(Argument::SymFloat(SymIntArgFloat::Name(n)))
        | Some(Argument::SymBool(SymBoolArg::Name(n))) => ctx
            .value_named(n)
            .ok_or_else(|| node.err(format!("value `{n}` is not defined before the node")))?,
        _ => match ctx.sym(node, name)? {
            Some(Sym::Known(v)) => return scalar(ctx, node, dtype, v as f64),
            Some(Sym::Tensor(t)) => t,
            None => return Err(node.err(format!("argument `{name}` is required"))),
        },
    };
    cast_to(ctx, node, t, dtype)
}

/// Whether argument `name` is a tensor (rather than a scalar).
pub(crate) fn is_tensor(node: &Node<'_>, name: &str) -> bool {
    matches!(node.arg(name), Some(Argument::Tensor(_)))
}

/// The dtype of argument `name`: a tensor's, else that of a scalar of its kind (`f32` for
/// floats, `i64` for ints, bool).
pub(crate) fn arg_dtype(ctx: &Ctx<'_>, node: &Node<'_>, name: &str) -> Result<DType> {
    Ok(match node.arg(name) {
        Some(Argument::Tensor(_)) => ctx.dtype(ctx.tensor(node, name)?),
        Some(Argument::Float(_)) | Some(Argument::SymFloat(_)) => DType::F32,
        Some(Argument::Bool(_)) | Some(Argument::SymBool(_)) => DType::Bool,
        _ => DType::I64,
    })
}

/// `axis` of a rank-`rank` tensor, negative counting from the end; the error names `what`.
pub(crate) fn axis(node: &Node<'_>, axis: i64, rank: usize, what: &str) -> Result<usize> {
    normalize_axis(axis, rank.max(1)).map_err(|m| node.err(format!("argument `{what}`: {m}")))
}

/// The `i`-th output's declared sizes, when all are literals.
pub(crate) fn out_static_shape(ctx: &Ctx<'_>, node: &Node<'_>, i: usize) -> Option<Vec<i64>> {
    let name = match node.raw.outputs.get(i)? {
        Argument::Tensor(n) => n,
        _ => return None,
    };
    ctx.meta(name)?
        .sizes
        .iter()
        .map(|s| match s {
            crate::schema::SymInt::Int(v) => Some(*v),
            crate::schema::SymInt::Expr(..) => None,
        })
        .collect()
}
