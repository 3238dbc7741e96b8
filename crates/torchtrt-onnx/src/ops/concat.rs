//! `Concat`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Concat;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Concat", concat);
}

/// `Concat` along `axis` (required from opset 4, 1 before).
fn concat(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let axis = match node.int("axis")? {
        Some(a) => a,
        None if ctx.opset() < 4 => 1,
        None => return Err(node.err("attribute `axis` is required")),
    };
    let inputs = ctx.inputs(node)?;
    if inputs.is_empty() {
        return Err(node.err("needs at least one input"));
    }
    Ok(vec![ctx.add(node, Concat { axis }, &inputs)?])
}
