//! `Softmax` and `LogSoftmax`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Flatten, Reshape, Shape, Softmax, normalize_axis};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Softmax", |ctx, node| softmax(ctx, node, false));
    r.add("LogSoftmax", |ctx, node| softmax(ctx, node, true));
}

/// From opset 13, (log-)softmax along `axis` (default −1). Before, the input is coerced to
/// a matrix at `axis` (default 1): flattened to `[d₀·…·d_{axis−1}, d_axis·…]`, normalised
/// over each row, and reshaped back to the input's (possibly dynamic) shape.
fn softmax(ctx: &mut Ctx<'_>, node: &Node<'_>, log: bool) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    if ctx.opset() >= 13 {
        let axis = node.int_or("axis", -1)?;
        return Ok(vec![ctx.add(node, Softmax { axis, log }, &[x])?]);
    }
    let rank = ctx.rank(x);
    let axis = node.int_or("axis", 1)?;
    let at = normalize_axis(axis, rank).map_err(|m| node.err(format!("attribute `axis`: {m}")))?;
    if at + 1 == rank {
        return Ok(vec![ctx.add(node, Softmax { axis: -1, log }, &[x])?]);
    }
    let flat = ctx.add(node, Flatten { axis: at as i64 }, &[x])?;
    let y = ctx.add(node, Softmax { axis: 1, log }, &[flat])?;
    let shape = ctx.add(node, Shape::default(), &[x])?;
    Ok(vec![ctx.add(node, Reshape::default(), &[y, shape])?])
}
