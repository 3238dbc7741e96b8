//! Dtype conversion: `Cast` and `CastLike`.

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::DType;

use super::util::cast_to;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;
use crate::tensor::dtype_from_onnx;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Cast", cast);
    r.add("CastLike", |ctx, node| {
        let like = ctx.input(node, 1)?;
        let to = ctx.ty(like).dtype;
        convert(ctx, node, to)
    });
}

/// `Cast` to the ONNX data type in attribute `to`. `saturate` (opset 19) only concerns
/// float8 targets, which no engine dtype is, so it is checked for its type and otherwise
/// has no effect.
fn cast(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let code = node
        .int("to")?
        .ok_or_else(|| node.err("attribute `to` is required"))?;
    let to = i32::try_from(code)
        .map_err(|_| node.err(format!("attribute `to`: unknown ONNX data type {code}")))
        .and_then(|c| dtype_from_onnx(c).map_err(|m| node.err(format!("attribute `to`: {m}"))))?;
    node.int_or("saturate", 1)?;
    convert(ctx, node, to)
}

fn convert(ctx: &mut Ctx<'_>, node: &Node<'_>, to: DType) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    Ok(vec![cast_to(ctx, node, x, to)?])
}
