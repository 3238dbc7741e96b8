//! Repetition: `Expand`, `Tile`.

use torchtrt_core::layers::{Expand, Tile};

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Expand", |ctx, node| {
        let (x, shape) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
        Ok(vec![ctx.add(node, Expand, &[x, shape])?])
    });
    r.add("Tile", |ctx, node| {
        if ctx.opset() < 6 {
            return Err(
                node.err("Tile before opset 6 (`tiles` and `axis` inputs) is not supported")
            );
        }
        let (x, repeats) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
        Ok(vec![ctx.add(node, Tile, &[x, repeats])?])
    });
}
