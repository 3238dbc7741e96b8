//! Activations (and their in-place `_` variants, which are the same op on a graph of
//! values); `gelu` becomes the `CustomGeluPluginDynamic` plugin.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Activation, ActivationKind};
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("activation");
    r.add(&["aten::relu", "aten::relu_"], relu);
    r.add(&["aten::sigmoid", "aten::sigmoid_"], sigmoid);
    r.add(&["aten::tanh", "aten::tanh_"], tanh);
    r.add(&["aten::hardswish", "aten::hardswish_"], hardswish);
    r.add(&["aten::hardsigmoid", "aten::hardsigmoid_"], hardsigmoid);
    r.add(&["aten::leaky_relu", "aten::leaky_relu_"], leaky_relu);
    r.add(&["aten::elu", "aten::elu_"], elu);
    r.add(&["aten::softplus"], softplus);
    r.add(&["aten::mish", "aten::mish_"], mish);
    r.add(&["aten::silu", "aten::silu_"], silu);
    r.add(&["aten::gelu", "aten::gelu_"], gelu);
}

fn act(ctx: &mut Ctx<'_>, node: &Node<'_>, kind: ActivationKind) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    Ok(vec![ctx.add(node, Activation { kind }, &[x])?])
}

fn relu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(ctx, node, ActivationKind::Relu)
}

fn sigmoid(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(ctx, node, ActivationKind::Sigmoid)
}

fn tanh(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(ctx, node, ActivationKind::Tanh)
}

fn hardswish(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(ctx, node, ActivationKind::HardSwish)
}

fn hardsigmoid(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(
        ctx,
        node,
        ActivationKind::HardSigmoid {
            alpha: 1.0 / 6.0,
            beta: 0.5,
        },
    )
}

fn mish(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(ctx, node, ActivationKind::Mish)
}

fn leaky_relu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let alpha = ctx.float_or(node, "negative_slope", 0.01)? as f32;
    act(ctx, node, ActivationKind::LeakyRelu { alpha })
}

/// `elu(x, alpha, scale, input_scale)`: plain ELU when both scales are 1.
fn elu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let alpha = ctx.float_or(node, "alpha", 1.0)? as f32;
    let scale = ctx.float_or(node, "scale", 1.0)?;
    let input_scale = ctx.float_or(node, "input_scale", 1.0)?;
    if scale != 1.0 || input_scale != 1.0 {
        return Err(node.err(format!(
            "scale {scale} and input_scale {input_scale}: only ELU with both 1 is supported"
        )));
    }
    act(ctx, node, ActivationKind::Elu { alpha })
}

/// `softplus(x, beta, threshold)`: `log(1 + exp(beta·x)) / beta`, linear above threshold.
fn softplus(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let beta = ctx.float_or(node, "beta", 1.0)?;
    if beta != 1.0 {
        return Err(node.err(format!(
            "beta {beta}: only softplus with beta 1 is supported"
        )));
    }
    act(ctx, node, ActivationKind::Softplus)
}

/// `x·σ(x)`.
fn silu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    act(ctx, node, ActivationKind::Silu)
}

/// `gelu(x, approximate)` → `CustomGeluPluginDynamic` (f32/f16/bf16), else the core layer.
fn gelu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let approximate = ctx
        .string(node, "approximate")?
        .unwrap_or_else(|| "none".into());
    if !matches!(approximate.as_str(), "none" | "tanh") {
        return Err(node.err(format!("approximate `{approximate}` is not none or tanh")));
    }
    if matches!(ctx.dtype(x), DType::F32 | DType::F16 | DType::BF16) {
        let key = PluginKey::new("", "CustomGeluPluginDynamic", "1");
        let fields = FieldCollection::new().with("approximate", approximate.as_str());
        return ctx.plugin(node, &key, &fields, &[x]);
    }
    let kind = ActivationKind::Gelu {
        tanh: approximate == "tanh",
    };
    Ok(vec![ctx.add(node, Activation { kind }, &[x])?])
}
