//! Normalization: batch norm in inference (folded into a per-channel scale and shift) and
//! with batch statistics, layer norm, group norm, and instance norm onto the
//! `InstanceNormalization_TRT` plugin.

use torchtrt_core::layers::{Concat, Elementwise, ElementwiseOp, Normalization, Reshape, Shape};
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt_core::{Tensor, TensorId};

use super::util::{cast_to, i64s};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("norm");
    r.add(
        &[
            "aten::batch_norm",
            "aten::_native_batch_norm_legit_no_training",
        ],
        batch_norm,
    );
    r.add(
        &["aten::_native_batch_norm_legit", "aten::native_batch_norm"],
        batch_norm,
    );
    r.add(&["aten::layer_norm", "aten::native_layer_norm"], layer_norm);
    r.add(&["aten::group_norm", "aten::native_group_norm"], group_norm);
    r.add(&["aten::instance_norm"], instance_norm);
}

/// A per-channel vector `v` shaped `[C, 1, …]` to broadcast against a rank-`rank` input.
fn per_channel(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    v: TensorId,
    rank: usize,
    dtype: DType,
) -> Result<TensorId> {
    let v = cast_to(ctx, node, v, dtype)?;
    let mut dims = vec![-1];
    dims.extend(std::iter::repeat_n(1, rank.saturating_sub(2)));
    ctx.add(
        node,
        Reshape {
            dims,
            allow_zero: false,
        },
        &[v],
    )
}

fn batch_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "input")?;
    let (rank, dtype) = (ctx.rank(x), ctx.dtype(x));
    if rank < 2 {
        return Err(node.err(format!("the input must be [N, C, …], got rank {rank}")));
    }
    let eps = ctx.float_or(node, "eps", 1e-5)?;
    let weight = ctx.opt_tensor(node, "weight")?;
    let bias = ctx.opt_tensor(node, "bias")?;
    let mean = ctx.opt_tensor(node, "running_mean")?;
    let var = ctx.opt_tensor(node, "running_var")?;
    let training = node.op.overload == "no_stats" || ctx.bool_or(node, "training", false)?;
    let y = match (training, mean, var) {
        (false, Some(m), Some(v)) => {
            let (m, v) = (ctx.value_f64s(m), ctx.value_f64s(v));
            let (Some(m), Some(v)) = (m, v) else {
                return Err(node.err("running_mean and running_var must be constants"));
            };
            let w = weight
                .and_then(|w| ctx.value_f64s(w))
                .unwrap_or_else(|| vec![1.0; m.len()]);
            let b = bias
                .and_then(|b| ctx.value_f64s(b))
                .unwrap_or_else(|| vec![0.0; m.len()]);
            if weight.is_some_and(|t| ctx.value(t).is_none())
                || bias.is_some_and(|t| ctx.value(t).is_none())
            {
                return Err(node.err("weight and bias must be constants"));
            }
            let scale: Vec<f32> = (0..m.len())
                .map(|c| (w[c] / (v[c] + eps).sqrt()) as f32)
                .collect();
            let shift: Vec<f32> = (0..m.len())
                .map(|c| (b[c] - m[c] * w[c] / (v[c] + eps).sqrt()) as f32)
                .collect();
            let s = ctx.constant(node, Tensor::from_vec(&[scale.len()], scale)?)?;
            let t = ctx.constant(node, Tensor::from_vec(&[shift.len()], shift)?)?;
            let s = per_channel(ctx, node, s, rank, dtype)?;
            let t = per_channel(ctx, node, t, rank, dtype)?;
            let y = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[x, s])?;
            ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[y, t])?
        }
        _ => {
            let mut axes = vec![0];
            axes.extend(2..rank as i64);
            let y = ctx.add(
                node,
                Normalization {
                    axes,
                    epsilon: eps as f32,
                },
                &[x],
            )?;
            affine(ctx, node, y, weight, bias, rank, dtype)?
        }
    };
    Ok(vec![y])
}

/// `y·weight + bias` with per-channel vectors (either may be absent).
fn affine(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    mut y: TensorId,
    weight: Option<TensorId>,
    bias: Option<TensorId>,
    rank: usize,
    dtype: DType,
) -> Result<TensorId> {
    if let Some(w) = weight {
        let w = per_channel(ctx, node, w, rank, dtype)?;
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[y, w])?;
    }
    if let Some(b) = bias {
        let b = per_channel(ctx, node, b, rank, dtype)?;
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[y, b])?;
    }
    Ok(y)
}

fn layer_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "input")?;
    let shape = ctx
        .ints(node, "normalized_shape")?
        .ok_or_else(|| node.err("argument `normalized_shape` is required"))?;
    let rank = ctx.rank(x) as i64;
    let k = shape.len() as i64;
    if k == 0 || k > rank {
        return Err(node.err(format!(
            "normalized_shape {shape:?} for an input of rank {rank}"
        )));
    }
    let eps = ctx.float_or(node, "eps", 1e-5)? as f32;
    let dtype = ctx.dtype(x);
    let mut ins = vec![x];
    let weight = ctx.opt_tensor(node, "weight")?;
    let bias = ctx.opt_tensor(node, "bias")?;
    match (weight, bias) {
        (Some(w), b) => {
            ins.push(cast_to(ctx, node, w, dtype)?);
            if let Some(b) = b {
                ins.push(cast_to(ctx, node, b, dtype)?);
            }
        }
        (None, Some(b)) => {
            let ones = super::util::scalar(ctx, node, dtype, 1.0)?;
            ins.push(ones);
            ins.push(cast_to(ctx, node, b, dtype)?);
        }
        (None, None) => {}
    }
    let layer = Normalization {
        axes: (rank - k..rank).collect(),
        epsilon: eps,
    };
    Ok(vec![ctx.add(node, layer, &ins)?])
}

/// `group_norm(input, num_groups, weight, bias, eps)` and `native_group_norm(input, weight,
/// bias, N, C, HxW, group, eps)`: `[N, G, rest]`, normalised over `rest`, reshaped back.
fn group_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "input")?;
    let (rank, dtype) = (ctx.rank(x), ctx.dtype(x));
    let groups = match ctx.int(node, "num_groups")? {
        Some(g) => g,
        None => ctx
            .int(node, "group")?
            .ok_or_else(|| node.err("the group count is required"))?,
    };
    let eps = ctx.float_or(node, "eps", 1e-5)? as f32;
    let head = ctx.add(
        node,
        Shape {
            start: 0,
            end: Some(1),
        },
        &[x],
    )?;
    let rest = i64s(ctx, node, &[groups, -1])?;
    let grouped_shape = ctx.add(node, Concat { axis: 0 }, &[head, rest])?;
    let grouped = ctx.add(node, Reshape::default(), &[x, grouped_shape])?;
    let normed = ctx.add(
        node,
        Normalization {
            axes: vec![2],
            epsilon: eps,
        },
        &[grouped],
    )?;
    let full = ctx.add(
        node,
        Shape {
            start: 0,
            end: None,
        },
        &[x],
    )?;
    let y = ctx.add(node, Reshape::default(), &[normed, full])?;
    let (w, b) = (
        ctx.opt_tensor(node, "weight")?,
        ctx.opt_tensor(node, "bias")?,
    );
    Ok(vec![affine(ctx, node, y, w, b, rank, dtype)?])
}

/// `instance_norm` with input statistics → `InstanceNormalization_TRT` (constant or absent
/// weight and bias, f32/f16/bf16, rank 3 to 5); otherwise a normalization over the
/// spatial axes and a per-channel affine step.
fn instance_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "input")?;
    let (rank, dtype) = (ctx.rank(x), ctx.dtype(x));
    if !ctx.bool_or(node, "use_input_stats", true)? {
        return Err(node.err("instance_norm with use_input_stats=False is not supported"));
    }
    let eps = ctx.float_or(node, "eps", 1e-5)?;
    let weight = ctx.opt_tensor(node, "weight")?;
    let bias = ctx.opt_tensor(node, "bias")?;
    let channels = ctx.ty(x).shape.get(1).and_then(|d| d.as_const());
    let known = |t: Option<TensorId>, fill: f64| -> Option<Vec<f32>> {
        match t {
            Some(t) => ctx
                .value_f64s(t)
                .map(|v| v.into_iter().map(|x| x as f32).collect()),
            None => channels.map(|c| vec![fill as f32; c as usize]),
        }
    };
    if (3..=5).contains(&rank)
        && matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
        && let (Some(s), Some(b)) = (known(weight, 1.0), known(bias, 0.0))
    {
        let fields = FieldCollection::new()
            .with("epsilon", eps as f32)
            .with("scales", s)
            .with("bias", b);
        let key = PluginKey::new("", "InstanceNormalization_TRT", "1");
        return ctx.plugin(node, &key, &fields, &[x]);
    }
    let layer = Normalization {
        axes: (2..rank as i64).collect(),
        epsilon: eps as f32,
    };
    let y = ctx.add(node, layer, &[x])?;
    Ok(vec![affine(ctx, node, y, weight, bias, rank, dtype)?])
}
