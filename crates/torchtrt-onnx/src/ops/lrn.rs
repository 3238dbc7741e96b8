//! LRN (local response normalization across channels), as AlexNet-era models use it:
//! `y = x / (bias + alpha/size · Σ_{c' ∈ window(c)} x²)^beta`. The channel-window sum is an
//! average pool (padding counted) over a channel axis made spatial by an `Unsqueeze`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp, PoolKind, Pooling, Squeeze, Unsqueeze};

use super::util::scalar;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("LRN", lrn);
}

fn lrn(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let size = node
        .int("size")?
        .ok_or_else(|| node.err("attribute `size` is required"))?;
    if size < 1 {
        return Err(node.err(format!("size must be positive, got {size}")));
    }
    let alpha = node.float_or("alpha", 1e-4)?;
    let beta = node.float_or("beta", 0.75)?;
    let bias = node.float_or("bias", 1.0)?;
    let rank = ctx.rank(x);
    if rank < 3 {
        return Err(node.err(format!("needs an input of rank ≥ 3, got rank {rank}")));
    }
    let dtype = ctx.ty(x).dtype;
    let sq = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[x, x])?;
    let lifted = ctx.add(node, Unsqueeze { axes: vec![1] }, &[sq])?;
    let spatial = rank - 1;
    let mut kernel = vec![1; spatial];
    kernel[0] = size;
    let mut pads_begin = vec![0; spatial];
    let mut pads_end = vec![0; spatial];
    pads_begin[0] = (size - 1) / 2;
    pads_end[0] = size / 2;
    let pool = Pooling {
        kind: PoolKind::Average,
        strides: vec![1; spatial],
        kernel,
        pads_begin,
        pads_end,
        dilations: vec![1; spatial],
        ceil_mode: false,
        count_include_pad: true,
    };
    let mean = ctx.add(node, pool, &[lifted])?;
    let mean = ctx.add(
        node,
        Squeeze {
            axes: Some(vec![1]),
        },
        &[mean],
    )?;
    let a = scalar(ctx, node, dtype, alpha as f64)?;
    let scaled = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[mean, a])?;
    let b = scalar(ctx, node, dtype, bias as f64)?;
    let base = ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[scaled, b])?;
    let e = scalar(ctx, node, dtype, beta as f64)?;
    let denom = ctx.add(node, Elementwise::new(ElementwiseOp::Pow), &[base, e])?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Div),
        &[x, denom],
    )?])
}
