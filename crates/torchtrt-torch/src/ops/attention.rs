//! `scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
//! enable_gqa)`: `softmax(q·kᵀ·scale + mask) · v`, the mask boolean (keep where true) or
//! additive, causal as a lower-triangular boolean mask; grouped-query attention repeats
//! the key and value heads.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{
    ConstantOfShape, Elementwise, ElementwiseOp, MatMul, Select, Shape, Softmax, Transpose, Trilu,
};
use torchtrt_core::plugin_api::DType;

use super::util::{cast_to, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("attention");
    r.add(&["aten::scaled_dot_product_attention"], sdpa);
}

fn sdpa(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let q = ctx.tensor(node, "query")?;
    let k = ctx.tensor(node, "key")?;
    let v = ctx.tensor(node, "value")?;
    if ctx.bool_or(node, "enable_gqa", false)? {
        return Err(node.err("enable_gqa is not supported"));
    }
    let rank = ctx.rank(q);
    if rank < 2 || ctx.rank(k) != rank || ctx.rank(v) != rank {
        return Err(node.err("query, key and value must have the same rank ≥ 2"));
    }
    let dtype = ctx.dtype(q);
    let scale = match ctx.float(node, "scale")? {
        Some(s) => s,
        None => {
            let d = ctx.ty(q).shape[rank - 1]
                .as_const()
                .ok_or_else(|| node.err("the head size must be known at import time"))?;
            1.0 / (d as f64).sqrt()
        }
    };
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    let kt = ctx.add(node, Transpose { perm }, &[k])?;
    let s = ctx.add(
        node,
        MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[q, kt],
    )?;
    let sc = scalar(ctx, node, dtype, scale)?;
    let mut s = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[s, sc])?;
    if ctx.bool_or(node, "is_causal", false)? {
        let rows = ctx.add(
            node,
            Shape {
                start: rank as i64 - 2,
                end: None,
            },
            &[s],
        )?;
        let ones = ctx.add(
            node,
            ConstantOfShape {
                dtype: DType::Bool,
                value: vec![1],
            },
            &[rows],
        )?;
        let keep = ctx.add(node, Trilu { upper: false }, &[ones])?;
        s = masked(ctx, node, s, keep, dtype)?;
    }
    if let Some(m) = ctx.opt_tensor(node, "attn_mask")? {
        s = if ctx.dtype(m) == DType::Bool {
            masked(ctx, node, s, m, dtype)?
        } else {
            let m = cast_to(ctx, node, m, dtype)?;
            ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[s, m])?
        };
    }
    let p = ctx.add(
        node,
        Softmax {
            axis: -1,
            log: false,
        },
        &[s],
    )?;
    Ok(vec![ctx.add(
        node,
        MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[p, v],
    )?])
}

/// `keep ? s : -inf`.
fn masked(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    s: TensorId,
    keep: TensorId,
    dtype: DType,
) -> Result<TensorId> {
    let neg = scalar(ctx, node, dtype, f64::NEG_INFINITY)?;
    ctx.add(node, Select, &[keep, s, neg])
}
