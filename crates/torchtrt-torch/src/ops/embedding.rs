//! `embedding(weight, indices)`: a gather of the weight's rows.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Gather;
use torchtrt_core::plugin_api::DType;

use super::util::cast_to;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("embedding");
    r.add(&["aten::embedding"], embedding);
}

fn embedding(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let w = ctx.tensor(node, "weight")?;
    let i = ctx.tensor(node, "indices")?;
    let i = cast_to(ctx, node, i, DType::I64)?;
    Ok(vec![ctx.add(node, Gather { axis: 0 }, &[w, i])?])
}
