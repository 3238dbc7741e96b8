//! Constants and generated tensors: `Constant`, `ConstantOfShape`, `Range`.

use torchtrt_core::layers::{ConstantOfShape, Range};
use torchtrt_core::{Tensor, TensorId};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Constant", constant);
    r.add("ConstantOfShape", constant_of_shape);
    r.add("Range", |ctx, node| {
        let inputs = [
            ctx.input(node, 0)?,
            ctx.input(node, 1)?,
            ctx.input(node, 2)?,
        ];
        Ok(vec![ctx.add(node, Range, &inputs)?])
    });
}

/// The value of a `Constant` node, from whichever of its value attributes is set.
fn constant_value(node: &Node<'_>) -> Result<Tensor> {
    if let Some(t) = node.tensor("value")? {
        return Ok(t);
    }
    if let Some(v) = node.float("value_float")? {
        return Ok(Tensor::scalar(v));
    }
    if let Some(v) = node.int("value_int")? {
        return Ok(Tensor::scalar(v));
    }
    if let Some(v) = node.floats("value_floats")? {
        return Ok(Tensor::from_slice(&[v.len()], &v)?);
    }
    if let Some(v) = node.ints("value_ints")? {
        return Ok(Tensor::from_slice(&[v.len()], &v)?);
    }
    for unsupported in ["value_string", "value_strings"] {
        if node.attr(unsupported).is_some() {
            return Err(node.err(format!("`{unsupported}`: string tensors are not supported")));
        }
    }
    if node.attr("sparse_value").is_some() {
        return Err(node.err("`sparse_value`: sparse tensors are not supported"));
    }
    Err(node.err("no value attribute (value, value_float(s), value_int(s))"))
}

fn constant(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let value = constant_value(node)?;
    Ok(vec![ctx.constant(node, value)?])
}

/// `ConstantOfShape`: the `value` attribute (one element, f32 zero by default) filled into
/// the shape given by input 0.
fn constant_of_shape(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let shape = ctx.input(node, 0)?;
    let layer = match node.tensor("value")? {
        Some(v) => ConstantOfShape::from_tensor(&v)
            .map_err(|m| node.err(format!("attribute `value`: {m}")))?,
        None => ConstantOfShape::default(),
    };
    Ok(vec![ctx.add(node, layer, &[shape])?])
}
