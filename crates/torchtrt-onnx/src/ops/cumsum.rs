//! `CumSum`: the axis input stays a layer input, known at import time or not.

use torchtrt_core::TensorId;
use torchtrt_core::layers::CumSum;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("CumSum", cum_sum);
}

fn cum_sum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let (x, axis) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let layer = CumSum {
        exclusive: node.bool_or("exclusive", false)?,
        reverse: node.bool_or("reverse", false)?,
    };
    Ok(vec![ctx.add(node, layer, &[x, axis])?])
}
