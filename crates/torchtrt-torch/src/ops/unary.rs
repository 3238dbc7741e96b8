//! Unary math: one core `Unary` layer each (`rsqrt` is two), in the program's dtype.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Unary, UnaryOp};

use super::util::{cast_to, out_dtype};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

const OPS: &[(&str, UnaryOp)] = &[
    ("abs", UnaryOp::Abs),
    ("neg", UnaryOp::Neg),
    ("exp", UnaryOp::Exp),
    ("log", UnaryOp::Log),
    ("sqrt", UnaryOp::Sqrt),
    ("reciprocal", UnaryOp::Reciprocal),
    ("floor", UnaryOp::Floor),
    ("ceil", UnaryOp::Ceil),
    ("round", UnaryOp::Round),
    ("sign", UnaryOp::Sign),
    ("sin", UnaryOp::Sin),
    ("cos", UnaryOp::Cos),
    ("tan", UnaryOp::Tan),
    ("asin", UnaryOp::Asin),
    ("acos", UnaryOp::Acos),
    ("atan", UnaryOp::Atan),
    ("sinh", UnaryOp::Sinh),
    ("cosh", UnaryOp::Cosh),
    ("asinh", UnaryOp::Asinh),
    ("acosh", UnaryOp::Acosh),
    ("atanh", UnaryOp::Atanh),
    ("erf", UnaryOp::Erf),
    ("logical_not", UnaryOp::Not),
    ("bitwise_not", UnaryOp::Not),
];

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("unary");
    for (name, _) in OPS {
        let plain = format!("aten::{name}");
        let inplace = format!("aten::{name}_");
        r.add(&[&plain, &inplace], unary);
    }
    r.add(&["aten::rsqrt", "aten::rsqrt_"], rsqrt);
}

fn unary(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let name = node.op.name.trim_end_matches('_');
    let op = OPS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
        .ok_or_else(|| node.err("not a unary op"))?;
    let x = ctx.tensor(node, "self")?;
    let x = match out_dtype(ctx, node, 0) {
        Some(d) if op != UnaryOp::Not && d != ctx.dtype(x) => cast_to(ctx, node, x, d)?,
        _ => x,
    };
    let x = if op == UnaryOp::Not {
        cast_to(ctx, node, x, torchtrt_core::plugin_api::DType::Bool)?
    } else {
        x
    };
    Ok(vec![ctx.add(node, Unary { op }, &[x])?])
}

fn rsqrt(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let s = ctx.add(node, Unary { op: UnaryOp::Sqrt }, &[x])?;
    Ok(vec![ctx.add(
        node,
        Unary {
            op: UnaryOp::Reciprocal,
        },
        &[s],
    )?])
}
