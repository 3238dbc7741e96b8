//! `BatchNormalization` in inference form: `y = x · a + b` per channel, with
//! `a = scale / √(var + ε)` and `b = bias − mean · a`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp, Unary, UnaryOp};

use super::params::{float_const, per_channel};
use super::util::{cast_to, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("BatchNormalization", batch_norm);
}

fn batch_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    if node.bool_or("training_mode", false)? {
        return Err(node.err("training mode is not supported (inference only)"));
    }
    if node.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(node.err(
            "the running mean/variance and saved statistics outputs exist only in training mode",
        ));
    }
    let x = ctx.input(node, 0)?;
    let params = [
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
        ctx.input(node, 3)?,
        ctx.input(node, 4)?,
    ];
    let epsilon = f64::from(node.float_or("epsilon", 1e-5)?);
    let rank = ctx.rank(x);
    let known = params.map(|t| ctx.value(t).map(|v| (v.to_f64_vec(), v.shape().to_vec())));
    let (a, b) = match known {
        [Some((s, shape)), Some((b, _)), Some((m, _)), Some((v, _))] => {
            fold(ctx, node, x, &shape, [&s, &b, &m, &v], epsilon)?
        }
        _ => affine_layers(ctx, node, x, params, epsilon)?,
    };
    let (a, b) = (
        per_channel(ctx, node, a, rank)?,
        per_channel(ctx, node, b, rank)?,
    );
    let y = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[x, a])?;
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Add),
        &[y, b],
    )?])
}

/// Computes `a` and `b` in f64 from constant parameters of `shape`.
fn fold(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    shape: &[usize],
    [scale, bias, mean, var]: [&Vec<f64>; 4],
    epsilon: f64,
) -> Result<(TensorId, TensorId)> {
    let n = scale.len();
    if [bias, mean, var].iter().any(|p| p.len() != n) {
        return Err(node.err("scale, B, input_mean and input_var must have the same length"));
    }
    let a: Vec<f64> = scale
        .iter()
        .zip(var)
        .map(|(s, v)| s / (v + epsilon).sqrt())
        .collect();
    let b: Vec<f64> = bias
        .iter()
        .zip(mean)
        .zip(&a)
        .map(|((b, m), a)| b - m * a)
        .collect();
    let dtype = ctx.ty(x).dtype;
    Ok((
        float_const(ctx, node, dtype, shape, &a)?,
        float_const(ctx, node, dtype, shape, &b)?,
    ))
}

/// Computes `a` and `b` with layers, for parameters known only at run time.
fn affine_layers(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    params: [TensorId; 4],
    epsilon: f64,
) -> Result<(TensorId, TensorId)> {
    let dtype = ctx.ty(x).dtype;
    let mut cast = [x; 4];
    for (c, p) in cast.iter_mut().zip(params) {
        *c = cast_to(ctx, node, p, dtype)?;
    }
    let [scale, bias, mean, var] = cast;
    let eps = scalar(ctx, node, dtype, epsilon)?;
    let v = ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[var, eps])?;
    let sd = ctx.add(node, Unary { op: UnaryOp::Sqrt }, &[v])?;
    let a = ctx.add(node, Elementwise::new(ElementwiseOp::Div), &[scale, sd])?;
    let ma = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[mean, a])?;
    let b = ctx.add(node, Elementwise::new(ElementwiseOp::Sub), &[bias, ma])?;
    Ok((a, b))
}
