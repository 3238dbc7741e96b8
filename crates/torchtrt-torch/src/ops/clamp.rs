//! `clamp` and its relatives: bounds known at import time become one `Clip` activation,
//! tensor bounds element-wise max/min.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Activation, ActivationKind, Elementwise, ElementwiseOp};

use super::util::{cast_to, is_tensor, operand, out_dtype};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("clamp");
    r.add(&["aten::clamp", "aten::clamp_"], clamp);
    r.add(&["aten::clip", "aten::clip_"], clamp);
    r.add(&["aten::clamp_min", "aten::clamp_min_"], clamp_min);
    r.add(&["aten::clamp_max", "aten::clamp_max_"], clamp_max);
    r.add(&["aten::hardtanh", "aten::hardtanh_"], hardtanh);
    r.add(&["aten::relu6", "aten::relu6_"], relu6);
}

fn bounded(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(x));
    let x = cast_to(ctx, node, x, dtype)?;
    let tensor_bound =
        min.is_some_and(|m| is_tensor(node, m)) || max.is_some_and(|m| is_tensor(node, m));
    if !tensor_bound && dtype.is_float() {
        let lo = match min {
            Some(m) => ctx.float(node, m)?,
            None => None,
        };
        let hi = match max {
            Some(m) => ctx.float(node, m)?,
            None => None,
        };
        let kind = ActivationKind::Clip {
            min: lo.map_or(f32::NEG_INFINITY, |v| v as f32),
            max: hi.map_or(f32::INFINITY, |v| v as f32),
        };
        return Ok(vec![ctx.add(node, Activation { kind }, &[x])?]);
    }
    let mut y = x;
    for (name, op) in [(min, ElementwiseOp::Max), (max, ElementwiseOp::Min)] {
        let Some(name) = name else { continue };
        if matches!(node.arg(name), None | Some(crate::schema::Argument::None)) {
            continue;
        }
        let b = operand(ctx, node, name, dtype)?;
        y = ctx.add(node, Elementwise::new(op), &[y, b])?;
    }
    Ok(vec![y])
}

fn clamp(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    bounded(ctx, node, Some("min"), Some("max"))
}

fn clamp_min(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    bounded(ctx, node, Some("min"), None)
}

fn clamp_max(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    bounded(ctx, node, None, Some("max"))
}

fn hardtanh(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let min = ctx.float_or(node, "min_val", -1.0)? as f32;
    let max = ctx.float_or(node, "max_val", 1.0)? as f32;
    Ok(vec![ctx.add(
        node,
        Activation {
            kind: ActivationKind::Clip { min, max },
        },
        &[x],
    )?])
}

fn relu6(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    Ok(vec![ctx.add(
        node,
        Activation {
            kind: ActivationKind::Clip { min: 0.0, max: 6.0 },
        },
        &[x],
    )?])
}
