//! `LpNormalization` → the `torch_tensorrt::NormalizePlugin` plugin in `normalize` mode.

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::{FieldCollection, PluginKey};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("LpNormalization", lp_norm);
}

/// `x / ‖x‖ₚ` along `axis`, `p` 1 or 2. ONNX gives 0 where the norm is 0; the plugin
/// divides by `max(‖x‖ₚ, eps)`, so `eps` is the smallest normal f32: a zero norm belongs to
/// an all-zero slice, which then stays 0, and every norm of at least that size is used as
/// it is.
fn lp_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let axis = node.int_or("axis", -1)?;
    let axis = i32::try_from(axis).map_err(|_| node.err(format!("axis {axis} is out of range")))?;
    let p = node.int_or("p", 2)?;
    if p != 1 && p != 2 {
        return Err(node.err(format!("p must be 1 or 2, got {p}")));
    }
    let fields = FieldCollection::new()
        .with("order", p as f32)
        .with("axes", vec![axis])
        .with("keep_dims", 0i32)
        .with("eps", f32::MIN_POSITIVE)
        .with("mode", "normalize");
    let key = PluginKey::new("torch_tensorrt", "NormalizePlugin", "1");
    ctx.plugin(node, &key, &fields, &[x])
}
