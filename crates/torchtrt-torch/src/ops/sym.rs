//! Shape arithmetic at run time: `sym_size`/`sym_numel` read a tensor's shape (a constant
//! when it is known), and Python's operators on SymInts (`_operator.mul`, `floordiv`, …,
//! `sym_max`, `math.ceil`) become element-wise layers on 0-d i64 tensors. Runtime asserts
//! and metadata checks (`_assert_*`) convert to nothing: the engine's profile bounds the
//! shapes.

use torchtrt_core::layers::{
    Cast, Elementwise, ElementwiseOp, Shape, Size, Squeeze, Unary, UnaryOp,
};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Tensor, TensorId};

use super::util::{arg_dtype, axis, operand, promote};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("sym");
    r.add(&["aten::sym_size", "aten::size"], sym_size);
    r.add(&["aten::sym_numel", "aten::numel"], sym_numel);
    r.add(&["aten::sym_storage_offset"], zero);
    r.add(
        &[
            "aten::_assert_tensor_metadata",
            "aten::_assert_scalar",
            "aten::_assert_async",
            "aten::sym_constrain_range",
            "aten::sym_constrain_range_for_size",
            "aten::_functional_sym_constrain_range",
            "aten::_functional_sym_constrain_range_for_size",
        ],
        nothing,
    );
    r.add(&["_operator::add"], add);
    r.add(&["_operator::sub"], sub);
    r.add(&["_operator::mul"], mul);
    r.add(&["_operator::floordiv"], floordiv);
    r.add(&["_operator::truediv"], truediv);
    r.add(&["_operator::mod"], modulo);
    r.add(&["_operator::pow"], pow);
    r.add(&["_operator::neg"], neg);
    r.add(&["_operator::eq"], eq);
    r.add(&["_operator::ne"], ne);
    r.add(&["_operator::lt"], lt);
    r.add(&["_operator::le"], le);
    r.add(&["_operator::gt"], gt);
    r.add(&["_operator::ge"], ge);
    r.add(&["_operator::getitem"], getitem);
    r.add(&["torch::sym_max"], sym_max);
    r.add(&["torch::sym_min"], sym_min);
    r.add(&["torch::sym_float"], sym_float);
    r.add(&["torch::sym_int", "math::floor", "math::trunc"], sym_floor);
    r.add(&["math::ceil"], sym_ceil);
}

fn sym_size(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let d = axis(node, ctx.int_or(node, "dim", 0)?, ctx.rank(x), "dim")?;
    if let Some(v) = ctx.ty(x).shape[d].as_const() {
        return Ok(vec![ctx.constant(node, Tensor::scalar(v))?]);
    }
    let s = ctx.add(
        node,
        Shape {
            start: d as i64,
            end: Some(d as i64 + 1),
        },
        &[x],
    )?;
    Ok(vec![ctx.add(
        node,
        Squeeze {
            axes: Some(vec![0]),
        },
        &[s],
    )?])
}

fn sym_numel(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    Ok(vec![ctx.add(node, Size, &[x])?])
}

fn zero(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![ctx.constant(node, Tensor::scalar(0i64))?])
}

fn nothing(_: &mut Ctx<'_>, _: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(Vec::new())
}

/// `a op b` on the two operands promoted to one dtype.
fn binary(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ElementwiseOp) -> Result<TensorId> {
    let dtype = promote(arg_dtype(ctx, node, "a")?, arg_dtype(ctx, node, "b")?);
    let a = operand(ctx, node, "a", dtype)?;
    let b = operand(ctx, node, "b", dtype)?;
    ctx.add(node, Elementwise::new(op), &[a, b])
}

fn add(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Add)?])
}

fn sub(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Sub)?])
}

fn mul(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Mul)?])
}

/// Python's `//`: the floor of the quotient (integers divided in f64, exact for sizes).
fn floordiv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = promote(arg_dtype(ctx, node, "a")?, arg_dtype(ctx, node, "b")?);
    let a = operand(ctx, node, "a", DType::F64)?;
    let b = operand(ctx, node, "b", DType::F64)?;
    let q = ctx.add(node, Elementwise::new(ElementwiseOp::Div), &[a, b])?;
    let f = ctx.add(node, Unary { op: UnaryOp::Floor }, &[q])?;
    Ok(vec![ctx.add(node, Cast { to: dtype }, &[f])?])
}

fn truediv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let a = operand(ctx, node, "a", DType::F64)?;
    let b = operand(ctx, node, "b", DType::F64)?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Div),
        &[a, b],
    )?])
}

fn modulo(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Mod)?])
}

fn pow(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Pow)?])
}

fn neg(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = arg_dtype(ctx, node, "a")?;
    let a = operand(ctx, node, "a", dtype)?;
    Ok(vec![ctx.add(node, Unary { op: UnaryOp::Neg }, &[a])?])
}

fn eq(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Equal)?])
}

fn ne(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let e = binary(ctx, node, ElementwiseOp::Equal)?;
    Ok(vec![ctx.add(node, Unary { op: UnaryOp::Not }, &[e])?])
}

fn lt(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Less)?])
}

fn le(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::LessOrEqual)?])
}

fn gt(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Greater)?])
}

fn ge(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::GreaterOrEqual)?])
}

/// `getitem(tensors, i)` of a list-valued node output.
fn getitem(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let list = ctx
        .tensors(node, "a")
        .or_else(|_| ctx.tensors(node, "self"))?;
    let i = ctx
        .int(node, "b")?
        .ok_or_else(|| node.err("the index must be known at import time"))?;
    let k = usize::try_from(if i < 0 { i + list.len() as i64 } else { i })
        .ok()
        .filter(|&k| k < list.len())
        .ok_or_else(|| node.err(format!("index {i} of a list of {}", list.len())))?;
    Ok(vec![list[k]])
}

fn sym_max(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Max)?])
}

fn sym_min(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Min)?])
}

fn sym_float(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![operand(ctx, node, "a", DType::F64)?])
}

fn rounded(ctx: &mut Ctx<'_>, node: &Node<'_>, op: UnaryOp) -> Result<Vec<TensorId>> {
    let a = operand(ctx, node, "a", DType::F64)?;
    let r = ctx.add(node, Unary { op }, &[a])?;
    Ok(vec![ctx.add(node, Cast { to: DType::I64 }, &[r])?])
}

fn sym_floor(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    rounded(ctx, node, UnaryOp::Floor)
}

fn sym_ceil(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    rounded(ctx, node, UnaryOp::Ceil)
}
