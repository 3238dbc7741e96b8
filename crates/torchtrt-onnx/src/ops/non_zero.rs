//! `NonZero`, whose output length follows from its input's values.

use torchtrt_core::layers::NonZero;

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("NonZero", |ctx, node| {
        let x = ctx.input(node, 0)?;
        Ok(vec![ctx.add(node, NonZero, &[x])?])
    });
}
