//! `softmax`, `log_softmax` and their `_` internal forms.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Softmax;

use super::util::{cast_to, out_dtype};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("softmax");
    r.add(
        &["aten::softmax", "aten::_softmax", "aten::_safe_softmax"],
        softmax,
    );
    r.add(&["aten::log_softmax", "aten::_log_softmax"], log_softmax);
}

fn run(ctx: &mut Ctx<'_>, node: &Node<'_>, log: bool) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(x));
    let x = cast_to(ctx, node, x, dtype)?;
    let axis = ctx
        .int(node, "dim")?
        .ok_or_else(|| node.err("argument `dim` is required"))?;
    Ok(vec![ctx.add(node, Softmax { axis, log }, &[x])?])
}

fn softmax(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    run(ctx, node, false)
}

fn log_softmax(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    run(ctx, node, true)
}
