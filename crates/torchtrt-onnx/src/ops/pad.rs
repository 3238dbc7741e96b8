//! `Pad`.

use torchtrt_core::layers::{Pad, PadMode};
use torchtrt_core::{Tensor, TensorId};

use super::util::{i64s, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Pad", pad);
}

/// `Pad` in any mode. Before opset 11 the pads (`paddings` in opset 1) and the constant
/// `value` are attributes; from opset 11 they are inputs, with the optional `axes` input
/// of opset 18, and become the layer's inputs (known now or computed at run time).
fn pad(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let mode = match node.string_or("mode", "constant")?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => return Err(node.err(format!("attribute `mode`: unknown mode `{other}`"))),
    };
    let layer = Pad { mode };
    let dtype = ctx.ty(x).dtype;
    if ctx.opset() < 11 {
        let pads = match node.ints("pads")? {
            Some(p) => p,
            None => node
                .ints("paddings")?
                .ok_or_else(|| node.err("attribute `pads` is required"))?,
        };
        let pads = i64s(ctx, node, &pads)?;
        let value = scalar(ctx, node, dtype, f64::from(node.float_or("value", 0.0)?))?;
        return Ok(vec![ctx.add(node, layer, &[x, pads, value])?]);
    }
    let mut inputs = vec![x, ctx.input(node, 1)?];
    let value = ctx.opt_input(node, 2)?;
    let axes = ctx.opt_input(node, 3)?;
    match (value, axes) {
        (Some(v), _) => inputs.push(v),
        (None, Some(_)) => inputs.push(ctx.constant(node, Tensor::zeros(dtype, &[0]))?),
        (None, None) => {}
    }
    inputs.extend(axes);
    Ok(vec![ctx.add(node, layer, &inputs)?])
}
