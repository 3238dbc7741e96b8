//! Reshaping without reordering elements: `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Flatten, Reshape, Squeeze, Unsqueeze};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Reshape", reshape);
    r.add("Flatten", |ctx, node| {
        let x = ctx.input(node, 0)?;
        let axis = node.int_or("axis", 1)?;
        Ok(vec![ctx.add(node, Flatten { axis }, &[x])?])
    });
    r.add("Squeeze", squeeze);
    r.add("Unsqueeze", unsqueeze);
}

/// `Reshape`: the `shape` attribute before opset 5, the shape input after (known now or
/// computed at run time); `allowzero` from opset 14.
fn reshape(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let allow_zero = node.bool_or("allowzero", false)?;
    if ctx.opset() < 5 {
        let dims = node
            .ints("shape")?
            .ok_or_else(|| node.err("attribute `shape` is required"))?;
        let layer = Reshape { dims, allow_zero };
        return Ok(vec![ctx.add(node, layer, &[x])?]);
    }
    let shape = ctx.input(node, 1)?;
    let layer = Reshape {
        dims: Vec::new(),
        allow_zero,
    };
    Ok(vec![ctx.add(node, layer, &[x, shape])?])
}

/// `Squeeze`: optional `axes` attribute before opset 13, optional axes input after.
fn squeeze(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    if ctx.opset() < 13 {
        let layer = Squeeze {
            axes: node.ints("axes")?,
        };
        return Ok(vec![ctx.add(node, layer, &[x])?]);
    }
    let inputs: Vec<TensorId> = std::iter::once(x).chain(ctx.opt_input(node, 1)?).collect();
    Ok(vec![ctx.add(node, Squeeze::default(), &inputs)?])
}

/// `Unsqueeze`: the `axes` attribute before opset 13, the axes input after.
fn unsqueeze(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    if ctx.opset() < 13 {
        let axes = node
            .ints("axes")?
            .ok_or_else(|| node.err("attribute `axes` is required"))?;
        return Ok(vec![ctx.add(node, Unsqueeze { axes }, &[x])?]);
    }
    let axes = ctx.input(node, 1)?;
    Ok(vec![ctx.add(node, Unsqueeze::default(), &[x, axes])?])
}
