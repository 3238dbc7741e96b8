//! Pass-through ops: `Identity`, and `Dropout` in inference mode.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{ConstantOfShape, Shape};
use torchtrt_core::plugin_api::DType;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Identity", |ctx, node| Ok(vec![ctx.input(node, 0)?]));
    r.add("Dropout", dropout);
}

/// Dropout at inference: the output is the input, the optional mask all ones (bool from
/// opset 10, the input's dtype before). Training mode (opset 12's third input) is accepted
/// only with a ratio of 0, where it is the identity too.
fn dropout(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    if ctx.opset() < 7 && !node.bool_or("is_test", false)? {
        return Err(node.err("training mode (is_test = 0) is not supported"));
    }
    if let Some(training) = ctx.opt_input(node, 2)? {
        let on = ctx
            .value_i64s(training)
            .ok_or_else(|| {
                node.err("input 2 (`training_mode`) must be known at import time (training mode is not supported)")
            })?;
        if on.iter().any(|&v| v != 0) {
            let ratio = match ctx.opt_input(node, 1)? {
                None => Some(0.5),
                Some(r) => ctx.value_f64s(r).and_then(|v| v.first().copied()),
            };
            if ratio != Some(0.0) {
                return Err(node.err("training mode with a non-zero ratio is not supported"));
            }
        }
    }
    let mut outs = vec![x];
    if node.proto.output.get(1).is_some_and(|n| !n.is_empty()) {
        let dtype = if ctx.opset() < 10 {
            ctx.ty(x).dtype
        } else {
            DType::Bool
        };
        let fill = ones(dtype).ok_or_else(|| {
            node.err(format!(
                "before opset 10 the mask has the input's dtype, which must be floating-point, got {dtype}"
            ))
        })?;
        let shape = ctx.add(node, Shape::default(), &[x])?;
        outs.push(ctx.add(node, fill, &[shape])?);
    }
    Ok(outs)
}

/// A fill of ones of `dtype` (true for bool), for the float and bool masks Dropout returns.
fn ones(dtype: DType) -> Option<ConstantOfShape> {
    Some(match dtype {
        DType::Bool => ConstantOfShape {
            dtype,
            value: vec![1],
        },
        DType::F32 => ConstantOfShape::new(1f32),
        DType::F64 => ConstantOfShape::new(1f64),
        DType::F16 => ConstantOfShape::new(half::f16::ONE),
        DType::BF16 => ConstantOfShape::new(half::bf16::ONE),
        _ => return None,
    })
}
