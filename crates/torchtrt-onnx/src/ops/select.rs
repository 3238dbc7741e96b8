//! `Where`.

use torchtrt_core::layers::Select;

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Where", |ctx, node| {
        let inputs = [
            ctx.input(node, 0)?,
            ctx.input(node, 1)?,
            ctx.input(node, 2)?,
        ];
        Ok(vec![ctx.add(node, Select, &inputs)?])
    });
}
