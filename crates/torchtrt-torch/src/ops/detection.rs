//! `torchvision::nms` onto the `torch_tensorrt::NonMaxSuppression` plugin (torchvision
//! layout): the kept box indices by falling score, as many as survive.

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("detection");
    r.add(&["torchvision::nms"], nms);
}

/// `nms(boxes [N, 4] as x1, y1, x2, y2, scores [N], iou_threshold)`; the threshold must be
/// known when the program is compiled.
fn nms(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let boxes = ctx.tensor(node, "dets")?;
    let scores = ctx.tensor(node, "scores")?;
    let iou = ctx
        .float(node, "iou_threshold")?
        .ok_or_else(|| node.err("argument `iou_threshold` must be a constant"))?;
    for (what, t, rank) in [("dets", boxes, 2), ("scores", scores, 1)] {
        if ctx.rank(t) != rank {
            return Err(node.err(format!(
                "`{what}` must have rank {rank}, has {}",
                ctx.rank(t)
            )));
        }
        if !matches!(ctx.dtype(t), DType::F32 | DType::F16 | DType::BF16) {
            return Err(node.err(format!(
                "`{what}` is {}, not f32, f16 or bf16",
                ctx.dtype(t)
            )));
        }
    }
    let fields = FieldCollection::new()
        .with("layout", "torchvision")
        .with("iou_threshold", iou as f32);
    let key = PluginKey::new("torch_tensorrt", "NonMaxSuppression", "1");
    Ok(vec![ctx.plugin(node, &key, &fields, &[boxes, scores])?[0]])
}
