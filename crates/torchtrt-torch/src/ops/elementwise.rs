//! Binary element-wise ops with torch's broadcasting and type promotion (the program's
//! output dtype is the computation dtype): arithmetic (`alpha`, `rounding_mode`),
//! comparisons, logical and boolean bitwise ops, `where` and `masked_fill`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp, Select, Unary, UnaryOp};
use torchtrt_core::plugin_api::DType;

use super::util::{arg_dtype, cast_to, operand, out_dtype, promote, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("elementwise");
    r.add(&["aten::add", "aten::add_"], add);
    r.add(&["aten::sub", "aten::sub_"], sub);
    r.add(&["aten::rsub"], rsub);
    r.add(&["aten::mul", "aten::mul_"], mul);
    r.add(&["aten::div", "aten::div_"], div);
    r.add(&["aten::true_divide"], div);
    r.add(&["aten::floor_divide"], floor_divide);
    r.add(&["aten::pow", "aten::pow_"], pow);
    r.add(&["aten::maximum", "aten::fmax"], maximum);
    r.add(&["aten::minimum", "aten::fmin"], minimum);
    r.add(&["aten::remainder"], remainder);
    r.add(&["aten::fmod"], fmod);
    r.add(&["aten::eq"], eq);
    r.add(&["aten::ne"], ne);
    r.add(&["aten::lt"], lt);
    r.add(&["aten::le"], le);
    r.add(&["aten::gt"], gt);
    r.add(&["aten::ge"], ge);
    r.add(
        &["aten::logical_and", "aten::bitwise_and", "aten::__and__"],
        and,
    );
    r.add(
        &["aten::logical_or", "aten::bitwise_or", "aten::__or__"],
        or,
    );
    r.add(
        &["aten::logical_xor", "aten::bitwise_xor", "aten::__xor__"],
        xor,
    );
    r.add(&["aten::where"], where_);
    r.add(&["aten::masked_fill", "aten::masked_fill_"], masked_fill);
}

/// `self op other` in the program's output dtype (input dtype for comparisons' operands).
fn binary(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ElementwiseOp) -> Result<TensorId> {
    let dtype = compute_dtype(ctx, node, "self", "other")?;
    let a = operand(ctx, node, "self", dtype)?;
    let b = operand(ctx, node, "other", dtype)?;
    ctx.add(node, Elementwise::new(op), &[a, b])
}

fn compute_dtype(ctx: &Ctx<'_>, node: &Node<'_>, a: &str, b: &str) -> Result<DType> {
    Ok(match out_dtype(ctx, node, 0) {
        Some(d) if d != DType::Bool => d,
        _ => promote(arg_dtype(ctx, node, a)?, arg_dtype(ctx, node, b)?),
    })
}

/// `other·alpha`, in `dtype`.
fn scaled_other(ctx: &mut Ctx<'_>, node: &Node<'_>, dtype: DType, name: &str) -> Result<TensorId> {
    let b = operand(ctx, node, name, dtype)?;
    match ctx.float(node, "alpha")? {
        None | Some(1.0) => Ok(b),
        Some(a) => {
            let alpha = scalar(ctx, node, dtype, a)?;
            ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[b, alpha])
        }
    }
}

fn add(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = compute_dtype(ctx, node, "self", "other")?;
    let a = operand(ctx, node, "self", dtype)?;
    let b = scaled_other(ctx, node, dtype, "other")?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Add),
        &[a, b],
    )?])
}

fn sub(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = compute_dtype(ctx, node, "self", "other")?;
    let a = operand(ctx, node, "self", dtype)?;
    let b = scaled_other(ctx, node, dtype, "other")?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Sub),
        &[a, b],
    )?])
}

/// `other - self·alpha`.
fn rsub(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = compute_dtype(ctx, node, "self", "other")?;
    let a = scaled_other(ctx, node, dtype, "self")?;
    let b = operand(ctx, node, "other", dtype)?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Sub),
        &[b, a],
    )?])
}

fn mul(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Mul)?])
}

/// `div` with `rounding_mode` none (true division), `trunc` or `floor`; integer inputs are
/// divided in f64 and rounded back.
fn div(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let mode = ctx.string(node, "rounding_mode")?;
    let out = out_dtype(ctx, node, 0).unwrap_or(DType::F32);
    let dtype = if out.is_float() { out } else { DType::F64 };
    let a = operand(ctx, node, "self", dtype)?;
    let b = operand(ctx, node, "other", dtype)?;
    let q = ctx.add(node, Elementwise::new(ElementwiseOp::Div), &[a, b])?;
    let q = round(ctx, node, q, mode.as_deref())?;
    Ok(vec![cast_to(ctx, node, q, out)?])
}

fn round(ctx: &mut Ctx<'_>, node: &Node<'_>, q: TensorId, mode: Option<&str>) -> Result<TensorId> {
    match mode {
        None => Ok(q),
        Some("floor") => ctx.add(node, Unary { op: UnaryOp::Floor }, &[q]),
        Some("trunc") => {
            let s = ctx.add(node, Unary { op: UnaryOp::Sign }, &[q])?;
            let a = ctx.add(node, Unary { op: UnaryOp::Abs }, &[q])?;
            let f = ctx.add(node, Unary { op: UnaryOp::Floor }, &[a])?;
            ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[s, f])
        }
        Some(other) => Err(node.err(format!("rounding_mode `{other}` is not trunc or floor"))),
    }
}

fn floor_divide(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let out = out_dtype(ctx, node, 0).unwrap_or(DType::F32);
    let dtype = if out.is_float() { out } else { DType::F64 };
    let a = operand(ctx, node, "self", dtype)?;
    let b = operand(ctx, node, "other", dtype)?;
    let q = ctx.add(node, Elementwise::new(ElementwiseOp::Div), &[a, b])?;
    let q = round(ctx, node, q, Some("floor"))?;
    Ok(vec![cast_to(ctx, node, q, out)?])
}

/// `pow.Tensor_Tensor`, `pow.Tensor_Scalar` and `pow.Scalar` (`self` a scalar base).
fn pow(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = out_dtype(ctx, node, 0).unwrap_or(DType::F32);
    let a = operand(ctx, node, "self", dtype)?;
    let b = operand(ctx, node, "exponent", dtype)?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Pow),
        &[a, b],
    )?])
}

fn maximum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Max)?])
}

fn minimum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Min)?])
}

fn remainder(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![binary(ctx, node, ElementwiseOp::Mod)?])
}

fn fmod(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = compute_dtype(ctx, node, "self", "other")?;
    let a = operand(ctx, node, "self", dtype)?;
    let b = operand(ctx, node, "other", dtype)?;
    let layer = Elementwise {
        op: ElementwiseOp::Mod,
        fmod: true,
    };
    Ok(vec![ctx.add(node, layer, &[a, b])?])
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

/// A logical op on bools; the boolean bitwise ops are the same, integer ones are refused.
fn logical(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ElementwiseOp) -> Result<Vec<TensorId>> {
    if node.op.name.starts_with("bitwise") || node.op.name.starts_with("__") {
        let (a, b) = (
            arg_dtype(ctx, node, "self")?,
            arg_dtype(ctx, node, "other")?,
        );
        if a != DType::Bool || b != DType::Bool {
            return Err(node.err(format!(
                "bitwise ops on {a} and {b}: only bool operands are supported"
            )));
        }
    }
    let a = operand(ctx, node, "self", DType::Bool)?;
    let b = operand(ctx, node, "other", DType::Bool)?;
    Ok(vec![ctx.add(node, Elementwise::new(op), &[a, b])?])
}

fn and(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    logical(ctx, node, ElementwiseOp::And)
}

fn or(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    logical(ctx, node, ElementwiseOp::Or)
}

fn xor(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    logical(ctx, node, ElementwiseOp::Xor)
}

/// `where(condition, self, other)`; either choice may be a scalar.
fn where_(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let c = operand(ctx, node, "condition", DType::Bool)?;
    let dtype = compute_dtype(ctx, node, "self", "other")?;
    let a = operand(ctx, node, "self", dtype)?;
    let b = operand(ctx, node, "other", dtype)?;
    Ok(vec![ctx.add(node, Select, &[c, a, b])?])
}

/// `masked_fill(self, mask, value)`: `mask ? value : self`.
fn masked_fill(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dtype = ctx.dtype(x);
    let m = operand(ctx, node, "mask", DType::Bool)?;
    let v = operand(ctx, node, "value", dtype)?;
    Ok(vec![ctx.add(node, Select, &[m, v, x])?])
}
