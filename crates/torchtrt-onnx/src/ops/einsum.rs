//! `Einsum`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Einsum;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Einsum", einsum);
}

fn einsum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let equation = node
        .string("equation")?
        .ok_or_else(|| node.err("attribute `equation` is required"))?;
    let inputs = ctx.inputs(node)?;
    Ok(vec![ctx.add(node, Einsum { equation }, &inputs)?])
}
