//! Unary math.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Unary, UnaryOp};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    macro_rules! unary {
        ($($name:literal => $op:ident),*) => {$(
            r.add($name, |ctx, node| unary(ctx, node, UnaryOp::$op));
        )*};
    }
    unary!("Abs" => Abs, "Neg" => Neg, "Exp" => Exp, "Log" => Log, "Sqrt" => Sqrt,
        "Reciprocal" => Reciprocal, "Floor" => Floor, "Ceil" => Ceil, "Round" => Round,
        "Sign" => Sign, "Sin" => Sin, "Cos" => Cos, "Tan" => Tan, "Asin" => Asin,
        "Acos" => Acos, "Atan" => Atan, "Sinh" => Sinh, "Cosh" => Cosh, "Asinh" => Asinh,
        "Acosh" => Acosh, "Atanh" => Atanh, "Erf" => Erf, "Not" => Not);
}

fn unary(ctx: &mut Ctx<'_>, node: &Node<'_>, op: UnaryOp) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    Ok(vec![ctx.add(node, Unary { op }, &[x])?])
}
