//! `IsNaN`, `IsInf`.

use torchtrt_core::layers::{ValueTest, ValueTestKind};

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("IsNaN", |ctx, node| {
        let x = ctx.input(node, 0)?;
        let test = ValueTestKind::Nan;
        Ok(vec![ctx.add(node, ValueTest { test }, &[x])?])
    });
    r.add("IsInf", |ctx, node| {
        let x = ctx.input(node, 0)?;
        let test = ValueTestKind::Inf {
            positive: node.bool_or("detect_positive", true)?,
            negative: node.bool_or("detect_negative", true)?,
        };
        Ok(vec![ctx.add(node, ValueTest { test }, &[x])?])
    });
}
