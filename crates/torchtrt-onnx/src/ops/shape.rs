//! Shape queries: `Shape`, `Size`.

use torchtrt_core::layers::{Shape, Size};

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Shape", |ctx, node| {
        let x = ctx.input(node, 0)?;
        let layer = Shape {
            start: node.int_or("start", 0)?,
            end: node.int("end")?,
        };
        Ok(vec![ctx.add(node, layer, &[x])?])
    });
    r.add("Size", |ctx, node| {
        let x = ctx.input(node, 0)?;
        Ok(vec![ctx.add(node, Size, &[x])?])
    });
}
