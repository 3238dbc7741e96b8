//! Activations; `Gelu` becomes the `CustomGeluPluginDynamic` plugin.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Activation, ActivationKind as A, Elementwise, ElementwiseOp};
use torchtrt_core::plugin_api::{FieldCollection, PluginKey};

use super::util::cast_to;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Relu", |c, n| act(c, n, A::Relu));
    r.add("Sigmoid", |c, n| act(c, n, A::Sigmoid));
    r.add("Tanh", |c, n| act(c, n, A::Tanh));
    r.add("Softplus", |c, n| act(c, n, A::Softplus));
    r.add("Softsign", |c, n| act(c, n, A::Softsign));
    r.add("HardSwish", |c, n| act(c, n, A::HardSwish));
    r.add("Mish", |c, n| act(c, n, A::Mish));
    r.add("LeakyRelu", |c, n| {
        let alpha = n.float_or("alpha", 0.01)?;
        act(c, n, A::LeakyRelu { alpha })
    });
    r.add("Elu", |c, n| {
        let alpha = n.float_or("alpha", 1.0)?;
        act(c, n, A::Elu { alpha })
    });
    r.add("Celu", |c, n| {
        let alpha = n.float_or("alpha", 1.0)?;
        act(c, n, A::Celu { alpha })
    });
    r.add("ThresholdedRelu", |c, n| {
        let alpha = n.float_or("alpha", 1.0)?;
        act(c, n, A::ThresholdedRelu { alpha })
    });
    r.add("Selu", |c, n| {
        let alpha = n.float_or("alpha", 1.673_263_2)?;
        let gamma = n.float_or("gamma", 1.050_701)?;
        act(c, n, A::Selu { alpha, gamma })
    });
    r.add("HardSigmoid", |c, n| {
        let alpha = n.float_or("alpha", 0.2)?;
        let beta = n.float_or("beta", 0.5)?;
        act(c, n, A::HardSigmoid { alpha, beta })
    });
    r.add("Clip", clip);
    r.add("Gelu", gelu);
}

fn act(ctx: &mut Ctx<'_>, node: &Node<'_>, kind: A) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    Ok(vec![ctx.add(node, Activation { kind }, &[x])?])
}

/// Clip: attributes before opset 11, optional tensor inputs after. Known bounds become
/// one `Clip` activation; run-time bounds become `Max`/`Min` layers.
fn clip(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let dtype = ctx.ty(x).dtype;
    if ctx.opset() < 11 {
        let min = node.float_or("min", f32::MIN)?;
        let max = node.float_or("max", f32::MAX)?;
        return act(ctx, node, A::Clip { min, max });
    }
    let (lo, hi) = (ctx.opt_input(node, 1)?, ctx.opt_input(node, 2)?);
    let known = |t: Option<TensorId>, d: f32| match t {
        None => Some(d),
        Some(t) => ctx.value_f64s(t).and_then(|v| v.first().map(|&x| x as f32)),
    };
    if dtype.is_float()
        && let (Some(min), Some(max)) = (known(lo, f32::MIN), known(hi, f32::MAX))
    {
        return act(ctx, node, A::Clip { min, max });
    }
    let mut y = x;
    if let Some(lo) = lo {
        let lo = cast_to(ctx, node, lo, dtype)?;
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Max), &[y, lo])?;
    }
    if let Some(hi) = hi {
        let hi = cast_to(ctx, node, hi, dtype)?;
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Min), &[y, hi])?;
    }
    Ok(vec![y])
}

/// Gelu (opset 20) → `CustomGeluPluginDynamic`.
fn gelu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let approximate = node.string_or("approximate", "none")?;
    let fields = FieldCollection::new().with("approximate", approximate.as_str());
    let key = PluginKey::new("", "CustomGeluPluginDynamic", "1");
    ctx.plugin(node, &key, &fields, &[x])
}
