//! Binary and variadic element-wise ops.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp};

use super::util::{cast_to, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    macro_rules! binary {
        ($($name:literal => $op:ident),*) => {$(
            r.add($name, |ctx, node| binary(ctx, node, ElementwiseOp::$op));
        )*};
    }
    binary!("Add" => Add, "Sub" => Sub, "Mul" => Mul, "Div" => Div, "And" => And, "Or" => Or,
        "Xor" => Xor, "Equal" => Equal, "Less" => Less, "LessOrEqual" => LessOrEqual,
        "Greater" => Greater, "GreaterOrEqual" => GreaterOrEqual);
    r.add("Pow", pow);
    r.add("Mod", modulo);
    r.add("BitShift", |ctx, node| {
        let op = match node.string("direction")?.as_deref() {
            Some("LEFT") => ElementwiseOp::ShiftLeft,
            Some("RIGHT") => ElementwiseOp::ShiftRight,
            other => {
                return Err(node.err(format!(
                    "attribute `direction` must be LEFT or RIGHT, got {other:?}"
                )));
            }
        };
        binary(ctx, node, op)
    });
    r.add("Max", |ctx, node| variadic(ctx, node, ElementwiseOp::Max));
    r.add("Min", |ctx, node| variadic(ctx, node, ElementwiseOp::Min));
    r.add("Sum", |ctx, node| variadic(ctx, node, ElementwiseOp::Add));
    r.add("Mean", mean);
}

fn binary(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ElementwiseOp) -> Result<Vec<TensorId>> {
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    Ok(vec![ctx.add(node, Elementwise::new(op), &[a, b])?])
}

fn pow(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let a = ctx.input(node, 0)?;
    let b = ctx.input(node, 1)?;
    let b = cast_to(ctx, node, b, ctx.ty(a).dtype)?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Pow),
        &[a, b],
    )?])
}

fn modulo(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let fmod = node.bool_or("fmod", false)?;
    let layer = Elementwise {
        op: ElementwiseOp::Mod,
        fmod,
    };
    Ok(vec![ctx.add(node, layer, &[a, b])?])
}

fn variadic(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ElementwiseOp) -> Result<Vec<TensorId>> {
    let inputs = ctx.inputs(node)?;
    let (&first, rest) = inputs
        .split_first()
        .ok_or_else(|| node.err("needs at least one input"))?;
    let mut acc = first;
    for &x in rest {
        acc = ctx.add(node, Elementwise::new(op), &[acc, x])?;
    }
    Ok(vec![acc])
}

fn mean(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let n = ctx.inputs(node)?.len();
    let sum = variadic(ctx, node, ElementwiseOp::Add)?[0];
    let d = scalar(ctx, node, ctx.ty(sum).dtype, n as f64)?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Div),
        &[sum, d],
    )?])
}
