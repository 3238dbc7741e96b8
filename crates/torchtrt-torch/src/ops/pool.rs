//! Pooling: `max_pool*` (with indices: the values only), `avg_pool*` onto the core
//! `Pooling` layer; adaptive pooling to 1×…×1 as a mean (or max) reduction, to other sizes
//! through the `torch_tensorrt::Interpolate` plugin's adaptive modes.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{PoolKind, Pooling, Reduce, ReduceOp};
use torchtrt_core::plugin_api::{FieldCollection, PluginKey};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("pool");
    r.add(
        &[
            "aten::max_pool1d",
            "aten::max_pool2d",
            "aten::max_pool3d",
            "aten::max_pool2d_with_indices",
            "aten::max_pool3d_with_indices",
        ],
        max_pool,
    );
    r.add(
        &["aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d"],
        avg_pool,
    );
    r.add(
        &[
            "aten::adaptive_avg_pool1d",
            "aten::adaptive_avg_pool2d",
            "aten::adaptive_avg_pool3d",
            "aten::_adaptive_avg_pool2d",
            "aten::_adaptive_avg_pool3d",
        ],
        adaptive_avg_pool,
    );
    r.add(
        &[
            "aten::adaptive_max_pool1d",
            "aten::adaptive_max_pool2d",
            "aten::adaptive_max_pool3d",
        ],
        adaptive_max_pool,
    );
}

/// The pooled dims from the op's name (`max_pool2d` → 2).
fn dims_of(node: &Node<'_>) -> Result<usize> {
    let digit = node
        .op
        .name
        .chars()
        .find(|c| c.is_ascii_digit())
        .and_then(|c| c.to_digit(10));
    match digit {
        Some(d @ 1..=3) => Ok(d as usize),
        _ => Err(node.err("cannot tell the pooled dims from the op name")),
    }
}

/// Kernel, strides, pads and dilations, one entry per pooled dim.
struct Window {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    pads: Vec<i64>,
    dilations: Vec<i64>,
}

fn window(ctx: &Ctx<'_>, node: &Node<'_>, n: usize) -> Result<Window> {
    let expand = |what: &str, v: Option<Vec<i64>>, default: &[i64]| -> Result<Vec<i64>> {
        match v {
            None => Ok(default.to_vec()),
            Some(v) if v.is_empty() => Ok(default.to_vec()),
            Some(v) if v.len() == n => Ok(v),
            Some(v) if v.len() == 1 => Ok(vec![v[0]; n]),
            Some(v) => Err(node.err(format!("`{what}` has {} entries for {n} dims", v.len()))),
        }
    };
    let kernel = expand("kernel_size", ctx.ints(node, "kernel_size")?, &[])?;
    if kernel.len() != n {
        return Err(node.err("argument `kernel_size` is required"));
    }
    let strides = expand("stride", ctx.ints(node, "stride")?, &kernel)?;
    let pads = expand("padding", ctx.ints(node, "padding")?, &vec![0; n])?;
    let dilations = expand("dilation", ctx.ints(node, "dilation")?, &vec![1; n])?;
    Ok(Window {
        kernel,
        strides,
        pads,
        dilations,
    })
}

fn max_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let n = dims_of(node)?;
    let w = window(ctx, node, n)?;
    let layer = Pooling {
        kind: PoolKind::Max,
        kernel: w.kernel,
        strides: w.strides,
        pads_begin: w.pads.clone(),
        pads_end: w.pads,
        dilations: w.dilations,
        ceil_mode: ctx.bool_or(node, "ceil_mode", false)?,
        count_include_pad: false,
    };
    Ok(vec![ctx.add(node, layer, &[x])?])
}

fn avg_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let n = dims_of(node)?;
    if ctx.int(node, "divisor_override")?.is_some() {
        return Err(node.err("divisor_override is not supported"));
    }
    let w = window(ctx, node, n)?;
    let layer = Pooling {
        kind: PoolKind::Average,
        kernel: w.kernel,
        strides: w.strides,
        pads_begin: w.pads.clone(),
        pads_end: w.pads,
        dilations: vec![1; n],
        ceil_mode: ctx.bool_or(node, "ceil_mode", false)?,
        count_include_pad: ctx.bool_or(node, "count_include_pad", true)?,
    };
    Ok(vec![ctx.add(node, layer, &[x])?])
}

fn adaptive(ctx: &mut Ctx<'_>, node: &Node<'_>, max: bool) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let n = dims_of(node)?;
    let size = ctx
        .ints(node, "output_size")?
        .ok_or_else(|| node.err("argument `output_size` is required"))?;
    let rank = ctx.rank(x);
    if size.len() != n || rank != n + 2 {
        return Err(node.err(format!(
            "adaptive pooling of {n} dims needs an [N, C, …] input of rank {} and {n} sizes, got rank {rank} and {size:?}",
            n + 2
        )));
    }
    if size.iter().all(|&s| s == 1) {
        let op = if max { ReduceOp::Max } else { ReduceOp::Mean };
        let axes = (2..rank as i64).collect();
        return Ok(vec![ctx.add(
            node,
            Reduce {
                op,
                axes,
                keep_dims: true,
            },
            &[x],
        )?]);
    }
    let mode = format!("adaptive_{}_pool{n}d", if max { "max" } else { "avg" });
    let fields = FieldCollection::new()
        .with("mode", mode.as_str())
        .with("out_size", size);
    let key = PluginKey::new("torch_tensorrt", "Interpolate", "1");
    Ok(vec![ctx.plugin(node, &key, &fields, &[x])?[0]])
}

fn adaptive_avg_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    adaptive(ctx, node, false)
}

fn adaptive_max_pool(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    adaptive(ctx, node, true)
}
