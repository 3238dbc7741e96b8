//! `LayerNormalization`: one Normalization layer over the trailing axes from `axis`, and,
//! when asked for, the `Mean` and `InvStdDev` outputs in the stash type.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{
    Elementwise, ElementwiseOp, Normalization, Reduce, ReduceOp, Unary, UnaryOp,
};

use super::util::{cast_to, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;
use crate::tensor::dtype_from_onnx;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("LayerNormalization", layer_norm);
}

fn layer_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let mut ins = vec![x, ctx.input(node, 1)?];
    ins.extend(ctx.opt_input(node, 2)?);
    let rank = ctx.rank(x) as i64;
    let axis = node.int_or("axis", -1)?;
    let first = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&first) {
        return Err(node.err(format!(
            "axis {axis} is out of range for an input of rank {rank}"
        )));
    }
    let epsilon = node.float_or("epsilon", 1e-5)?;
    let axes: Vec<i64> = (first..rank).collect();
    let y = ctx.add(
        node,
        Normalization {
            axes: axes.clone(),
            epsilon,
        },
        &ins,
    )?;
    let wanted = |i: usize| node.proto.output.get(i).is_some_and(|o| !o.is_empty());
    if !wanted(1) && !wanted(2) {
        return Ok(vec![y]);
    }
    let stash = node.int_or("stash_type", 1)?;
    let stash = dtype_from_onnx(stash as i32).map_err(|m| node.err(format!("stash_type: {m}")))?;
    let xs = cast_to(ctx, node, x, stash)?;
    let (mean, inv_std) = statistics(ctx, node, xs, axes, epsilon)?;
    Ok(vec![y, mean, inv_std])
}

/// The mean and `1 / √(var + ε)` of `x` over `axes`, reduced axes kept as 1.
fn statistics(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    axes: Vec<i64>,
    epsilon: f32,
) -> Result<(TensorId, TensorId)> {
    let mean_of = |axes: Vec<i64>| Reduce {
        op: ReduceOp::Mean,
        axes,
        keep_dims: true,
    };
    let mean = ctx.add(node, mean_of(axes.clone()), &[x])?;
    let d = ctx.add(node, Elementwise::new(ElementwiseOp::Sub), &[x, mean])?;
    let d2 = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[d, d])?;
    let var = ctx.add(node, mean_of(axes), &[d2])?;
    let eps = scalar(ctx, node, ctx.ty(x).dtype, f64::from(epsilon))?;
    let v = ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[var, eps])?;
    let sd = ctx.add(node, Unary { op: UnaryOp::Sqrt }, &[v])?;
    let inv = ctx.add(
        node,
        Unary {
            op: UnaryOp::Reciprocal,
        },
        &[sd],
    )?;
    Ok((mean, inv))
}
