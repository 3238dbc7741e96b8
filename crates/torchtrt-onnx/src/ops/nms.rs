//! `NonMaxSuppression` → the `torch_tensorrt::NonMaxSuppression` plugin (ONNX layout), whose
//! selection is sized by the count it writes.

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::{FieldCollection, PluginKey};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("NonMaxSuppression", nms);
}

/// Boxes and scores stay layer inputs; `max_output_boxes_per_class`, `iou_threshold` and
/// `score_threshold` (inputs 2 to 4, optional) become fields when they are constants and
/// shape inputs of the plugin (read on the host at run time) when not. An absent or empty
/// `max_output_boxes_per_class` keeps nothing, as ONNX says.
fn nms(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let mut inputs = vec![ctx.input(node, 0)?, ctx.input(node, 1)?];
    let center = node.int_or("center_point_box", 0)?;
    if center != 0 && center != 1 {
        return Err(node.err(format!("center_point_box must be 0 or 1, got {center}")));
    }
    let mut fields = FieldCollection::new()
        .with("layout", "onnx")
        .with("center_point_box", center as i32)
        .with("max_output_boxes_per_class", 0i64)
        .with("iou_threshold", 0f32);
    let names = [
        ("max_output_boxes_per_class", "max_output_input"),
        ("iou_threshold", "iou_input"),
        ("score_threshold", "score_input"),
    ];
    for (k, (what, input_field)) in names.into_iter().enumerate() {
        let i = k + 2;
        let Some(t) = ctx.opt_input(node, i)? else {
            continue;
        };
        let Some(values) = ctx.value_f64s(t) else {
            fields.set(input_field, inputs.len() as i32);
            inputs.push(t);
            continue;
        };
        let value = match values.as_slice() {
            [] => continue,
            [x] => *x,
            more => {
                return Err(node.err(format!(
                    "input {i} (`{what}`) must hold one value, holds {}",
                    more.len()
                )));
            }
        };
        match k {
            0 => fields.set(what, value.clamp(0.0, i64::MAX as f64) as i64),
            1 => fields.set(what, value as f32),
            _ => {
                fields.set(what, value as f32);
                fields.set("use_score_threshold", 1i32);
            }
        }
    }
    let key = PluginKey::new("torch_tensorrt", "NonMaxSuppression", "1");
    let outs = ctx.plugin(node, &key, &fields, &inputs)?;
    Ok(outs.into_iter().take(1).collect())
}
