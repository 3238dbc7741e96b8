//! `InstanceNormalization` → the `InstanceNormalization_TRT` plugin when scale and bias are
//! constants (rank 3 to 5, f32/f16/bf16); otherwise a Normalization layer over the spatial
//! axes with a per-channel scale and bias.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Normalization;
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};

use super::params::per_channel;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("InstanceNormalization", instance_norm);
}

fn instance_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let (scale, bias) = (ctx.input(node, 1)?, ctx.input(node, 2)?);
    let epsilon = node.float_or("epsilon", 1e-5)?;
    let rank = ctx.rank(x);
    let plugin_dtype = matches!(ctx.ty(x).dtype, DType::F32 | DType::F16 | DType::BF16);
    if (3..=5).contains(&rank)
        && plugin_dtype
        && let (Some(s), Some(b)) = (ctx.value_f64s(scale), ctx.value_f64s(bias))
    {
        let to_f32 = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
        let fields = FieldCollection::new()
            .with("epsilon", epsilon)
            .with("scales", to_f32(s))
            .with("bias", to_f32(b));
        let key = PluginKey::new("", "InstanceNormalization_TRT", "1");
        return ctx.plugin(node, &key, &fields, &[x]);
    }
    if rank < 3 {
        return Err(node.err(format!(
            "the input must be [N, C, spatial…], got rank {rank}"
        )));
    }
    let (s, b) = (
        per_channel(ctx, node, scale, rank)?,
        per_channel(ctx, node, bias, rank)?,
    );
    let layer = Normalization {
        axes: (2..rank as i64).collect(),
        epsilon,
    };
    Ok(vec![ctx.add(node, layer, &[x, s, b])?])
}
