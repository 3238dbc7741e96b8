//! `Split`: one slice per output along an axis.

use torchtrt_core::layers::{CumSum, Slice, normalize_axis};
use torchtrt_core::{Tensor, TensorId};

use super::util::{i64s, ints_attr_or_input};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Split", split);
}

/// Where the parts' sizes come from.
enum Parts {
    /// Sizes known at import time.
    Known(Vec<i64>),
    /// A 1-D `split` input computed at run time.
    Computed(TensorId),
}

/// The part sizes: `split` (attribute before opset 13, input after), else equal parts of
/// the axis, which must then be known; with `num_outputs` (opset 18) or uneven lengths
/// every part has `⌈d/n⌉` elements but the last, which has the rest.
fn parts(ctx: &Ctx<'_>, node: &Node<'_>, x: TensorId, axis: usize) -> Result<Parts> {
    let n = node.proto.output.len();
    if let Some(t) = ctx.opt_input(node, 1)?
        && node.attr("split").is_none()
        && ctx.value(t).is_none()
    {
        return Ok(Parts::Computed(t));
    }
    let split = ints_attr_or_input(ctx, node, "split", 1)?;
    if let Some(split) = split {
        if split.len() != n {
            return Err(node.err(format!(
                "`split` {split:?} has {} entries for {n} outputs",
                split.len()
            )));
        }
        return Ok(Parts::Known(split));
    }
    let parts = match node.int("num_outputs")? {
        Some(k) if usize::try_from(k).ok() != Some(n) => {
            return Err(node.err(format!(
                "attribute `num_outputs` is {k}, but the node has {n} outputs"
            )));
        }
        _ => n as i64,
    };
    let d = ctx.ty(x).shape[axis].as_const().ok_or_else(|| {
        node.err(format!(
            "splitting the dynamic axis {axis} into equal parts needs `split`"
        ))
    })?;
    if parts == 0 {
        return Err(node.err("the node has no outputs"));
    }
    let chunk = if d % parts == 0 {
        d / parts
    } else {
        d / parts + 1
    };
    let mut sizes = vec![chunk; n];
    if let Some(last) = sizes.last_mut() {
        *last = d - chunk * (parts - 1);
    }
    Ok(Parts::Known(sizes))
}

fn split(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let rank = ctx.rank(x);
    let axis = normalize_axis(node.int_or("axis", 0)?, rank).map_err(|m| node.err(m))?;
    match parts(ctx, node, x, axis)? {
        Parts::Known(sizes) => known_parts(ctx, node, x, axis, &sizes),
        Parts::Computed(sizes) => computed_parts(ctx, node, x, axis, sizes),
    }
}

/// One slice layer per part, with its bounds as fields.
fn known_parts(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    axis: usize,
    sizes: &[i64],
) -> Result<Vec<TensorId>> {
    if let Some(s) = sizes.iter().find(|&&s| s < 0) {
        return Err(node.err(format!(
            "part sizes {sizes:?} contain the negative size {s}"
        )));
    }
    let total: i64 = sizes.iter().sum();
    if let Some(d) = ctx.ty(x).shape[axis].as_const()
        && d != total
    {
        return Err(node.err(format!(
            "part sizes {sizes:?} add up to {total}, but axis {axis} has {d} elements"
        )));
    }
    let mut start = 0;
    let mut outs = Vec::with_capacity(sizes.len());
    for &s in sizes {
        let layer = Slice {
            starts: vec![start],
            ends: vec![start + s],
            axes: vec![axis as i64],
            steps: vec![1],
        };
        outs.push(ctx.add(node, layer, &[x])?);
        start += s;
    }
    Ok(outs)
}

/// Parts sized at run time: the bounds of part `i` are entry `i` of the exclusive and the
/// inclusive running sums of `sizes`, fed to a slice layer as its parameter inputs.
fn computed_parts(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    axis: usize,
    sizes: TensorId,
) -> Result<Vec<TensorId>> {
    let n = node.proto.output.len();
    let len = ctx.known_shape(sizes).unwrap_or_default();
    if len != [n as i64] {
        return Err(node.err(format!(
            "input 1 (`split`) must be 1-D with one entry per output ({n}), got {}",
            torchtrt_core::plugin_api::format_shape(&ctx.ty(sizes).shape)
        )));
    }
    let zero = ctx.constant(node, Tensor::scalar(0i64))?;
    let starts = CumSum {
        exclusive: true,
        reverse: false,
    };
    let starts = ctx.add(node, starts, &[sizes, zero])?;
    let ends = ctx.add(node, CumSum::default(), &[sizes, zero])?;
    let axes = i64s(ctx, node, &[axis as i64])?;
    let mut outs = Vec::with_capacity(n);
    for i in 0..n as i64 {
        let entry = Slice {
            starts: vec![i],
            ends: vec![i + 1],
            axes: vec![0],
            steps: vec![1],
        };
        let start = ctx.add(node, entry.clone(), &[starts])?;
        let end = ctx.add(node, entry, &[ends])?;
        outs.push(ctx.add(node, Slice::default(), &[x, start, end, axes])?);
    }
    Ok(outs)
}
