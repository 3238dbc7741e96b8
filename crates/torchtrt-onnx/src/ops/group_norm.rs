//! `GroupNormalization`: `[N, C, …]` seen as `[N, G, C/G · …]`, normalized over the last
//! axis, and put back. Opset 18 scales and shifts per group, opset 21 per channel.

use std::sync::Arc;

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp, Normalization, Reshape, Shape, Unsqueeze};

use super::params::per_channel;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.register(
        "",
        "GroupNormalization",
        18,
        Some(20),
        Arc::new(|c: &mut Ctx<'_>, n: &Node<'_>| group_norm(c, n, false)),
        "builtin",
    );
    r.register(
        "",
        "GroupNormalization",
        21,
        None,
        Arc::new(|c: &mut Ctx<'_>, n: &Node<'_>| group_norm(c, n, true)),
        "builtin",
    );
}

/// Group normalization; `per_channel_affine` selects opset 21's `[C]` scale and bias over
/// opset 18's `[num_groups]`.
fn group_norm(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    per_channel_affine: bool,
) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let (scale, bias) = (ctx.input(node, 1)?, ctx.input(node, 2)?);
    let groups = node
        .int("num_groups")?
        .ok_or_else(|| node.err("attribute `num_groups` is required"))?;
    if groups < 1 {
        return Err(node.err(format!("num_groups {groups} must be positive")));
    }
    let rank = ctx.rank(x);
    if rank < 2 {
        return Err(node.err(format!("the input must be [N, C, …], got rank {rank}")));
    }
    let epsilon = node.float_or("epsilon", 1e-5)?;
    let norm = Normalization {
        axes: vec![2],
        epsilon,
    };
    let grouped = ctx.add(node, Reshape::new(vec![0, groups, -1]), &[x])?;
    let y = if per_channel_affine {
        let n = ctx.add(node, norm, &[grouped])?;
        let y = ungroup(ctx, node, n, x)?;
        let (s, b) = (
            per_channel(ctx, node, scale, rank)?,
            per_channel(ctx, node, bias, rank)?,
        );
        let y = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[y, s])?;
        ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[y, b])?
    } else {
        let s = ctx.add(node, Unsqueeze { axes: vec![1] }, &[scale])?;
        let b = ctx.add(node, Unsqueeze { axes: vec![1] }, &[bias])?;
        let n = ctx.add(node, norm, &[grouped, s, b])?;
        ungroup(ctx, node, n, x)?
    };
    Ok(vec![y])
}

/// `t` reshaped back to the shape of `like`.
fn ungroup(ctx: &mut Ctx<'_>, node: &Node<'_>, t: TensorId, like: TensorId) -> Result<TensorId> {
    if let Some(dims) = ctx.known_shape(like) {
        return ctx.add(node, Reshape::new(dims), &[t]);
    }
    let shape = ctx.add(node, Shape::default(), &[like])?;
    ctx.add(node, Reshape::default(), &[t, shape])
}
