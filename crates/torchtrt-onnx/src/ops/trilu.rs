//! `Trilu`: the optional `k` input stays a layer input, known at import time or not.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Trilu;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Trilu", trilu);
}

fn trilu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let mut inputs = vec![ctx.input(node, 0)?];
    inputs.extend(ctx.opt_input(node, 1)?);
    let layer = Trilu {
        upper: node.bool_or("upper", true)?,
    };
    Ok(vec![ctx.add(node, layer, &inputs)?])
}
