//! `Slice`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Slice;

use super::util::i64s;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Slice", slice);
}

/// `Slice`: `starts`, `ends` and optional `axes` attributes before opset 10; from opset 10
/// the inputs `starts`, `ends`, `axes`, `steps`, which become the layer's parameter inputs
/// (known now or computed at run time).
fn slice(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    if ctx.opset() < 10 {
        let required = |name: &str| {
            node.ints(name)?
                .ok_or_else(|| node.err(format!("attribute `{name}` is required")))
        };
        let starts = required("starts")?;
        let ends = required("ends")?;
        let axes = node
            .ints("axes")?
            .unwrap_or_else(|| (0..starts.len() as i64).collect());
        let layer = Slice {
            steps: vec![1; starts.len()],
            starts,
            ends,
            axes,
        };
        return Ok(vec![ctx.add(node, layer, &[x])?]);
    }
    let mut inputs = vec![x, ctx.input(node, 1)?, ctx.input(node, 2)?];
    let axes = ctx.opt_input(node, 3)?;
    let steps = ctx.opt_input(node, 4)?;
    match (axes, steps) {
        (Some(a), _) => inputs.push(a),
        (None, Some(_)) => inputs.push(i64s(ctx, node, &[])?),
        (None, None) => {}
    }
    inputs.extend(steps);
    Ok(vec![ctx.add(node, Slice::default(), &inputs)?])
}
