//! `MaxPool`, `AveragePool`, `LpPool`, and the global pools as reductions over the
//! spatial axes.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{PoolKind, Pooling, Reduce, ReduceOp};
use torchtrt_core::plugin_api::DType;

use super::util::cast_to;
use super::window::{AutoPad, window};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::proto::attribute_proto::AttributeType;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("MaxPool", max_pool);
    r.add("AveragePool", |ctx, node| {
        let x = ctx.input(node, 0)?;
        Ok(vec![pool(ctx, node, x, PoolKind::Average)?])
    });
    r.add("LpPool", lp_pool);
    r.add("GlobalAveragePool", |ctx, node| {
        global(ctx, node, ReduceOp::Mean)
    });
    r.add("GlobalMaxPool", |ctx, node| {
        global(ctx, node, ReduceOp::Max)
    });
}

/// A windowed pool of `x` by the node's window attributes.
fn pool(ctx: &mut Ctx<'_>, node: &Node<'_>, x: TensorId, kind: PoolKind) -> Result<TensorId> {
    let kernel = node
        .ints("kernel_shape")?
        .ok_or_else(|| node.err("attribute `kernel_shape` is required"))?;
    if ctx.rank(x) != kernel.len() + 2 {
        return Err(node.err(format!(
            "kernel_shape {kernel:?} does not fit an input of rank {}",
            ctx.rank(x)
        )));
    }
    let w = window(ctx, node, x, kernel)?;
    let layer = Pooling {
        kind,
        kernel: w.kernel,
        strides: w.strides,
        pads_begin: w.pads_begin,
        pads_end: w.pads_end,
        dilations: w.dilations,
        ceil_mode: node.bool_or("ceil_mode", false)? && AutoPad::of(node)? == AutoPad::NotSet,
        count_include_pad: node.bool_or("count_include_pad", false)?,
    };
    ctx.add(node, layer, &[x])
}

/// `MaxPool`; 8-bit integer inputs are pooled as f32 (exact) and cast back.
fn max_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    if node.proto.output.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(node.err("the Indices output is not supported"));
    }
    let x = ctx.input(node, 0)?;
    let dtype = ctx.ty(x).dtype;
    if !matches!(dtype, DType::U8 | DType::I8) {
        return Ok(vec![pool(ctx, node, x, PoolKind::Max)?]);
    }
    let xf = cast_to(ctx, node, x, DType::F32)?;
    let y = pool(ctx, node, xf, PoolKind::Max)?;
    Ok(vec![cast_to(ctx, node, y, dtype)?])
}

/// `LpPool`: `p` is an INT since opset 2 and a FLOAT in opset 1.
fn lp_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let p = match node.attr("p") {
        None => 2,
        Some(a) if a.r#type() == AttributeType::Float => {
            let p = a.f();
            if p.fract() != 0.0 {
                return Err(node.err(format!("p = {p} is not an integer")));
            }
            p as i64
        }
        Some(_) => node.int_or("p", 2)?,
    };
    let x = ctx.input(node, 0)?;
    Ok(vec![pool(ctx, node, x, PoolKind::Lp { p })?])
}

/// `GlobalAveragePool` / `GlobalMaxPool`: a reduction over every spatial axis, kept as 1.
fn global(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ReduceOp) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let rank = ctx.rank(x) as i64;
    if rank < 3 {
        return Err(node.err(format!(
            "the input must be [N, C, spatial…], got rank {rank}"
        )));
    }
    let layer = Reduce {
        op,
        axes: (2..rank).collect(),
        keep_dims: true,
    };
    Ok(vec![ctx.add(node, layer, &[x])?])
}
