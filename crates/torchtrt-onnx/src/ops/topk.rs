//! `TopK`: `k` an attribute before opset 10, an input (known at import time or not) after.

use torchtrt_core::TensorId;
use torchtrt_core::layers::TopK;

use super::util::i64s;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("TopK", top_k);
}

fn top_k(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let k = match (ctx.opt_input(node, 1)?, node.int("k")?) {
        (Some(k), _) => k,
        (None, Some(k)) => i64s(ctx, node, &[k])?,
        (None, None) => {
            return Err(node.err("needs `k`, as input 1 or (before opset 10) an attribute"));
        }
    };
    let layer = TopK {
        axis: node.int_or("axis", -1)?,
        largest: node.bool_or("largest", true)?,
        sorted: node.bool_or("sorted", true)?,
    };
    ctx.add_multi(node, layer, &[x, k])
}
