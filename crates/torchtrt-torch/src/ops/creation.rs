//! Tensor creation (`arange`, `full`, `zeros`/`ones` and their `_like`/`new_` forms,
//! `scalar_tensor`) and dtype conversions (`to`, `_to_copy`, `type_as`). Shapes known at
//! import time give constants; run-time shapes a `ConstantOfShape` layer.

use torchtrt_core::layers::{ConstantOfShape, Range, Shape};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Tensor, TensorId};

use super::util::{cast_to, out_dtype, scalar};
use crate::ctx::{Ctx, Sym};
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("creation");
    r.add(&["aten::arange"], arange);
    r.add(&["aten::full", "aten::new_full"], full);
    r.add(
        &[
            "aten::zeros",
            "aten::new_zeros",
            "aten::empty",
            "aten::new_empty",
        ],
        zeros,
    );
    r.add(&["aten::ones", "aten::new_ones"], ones);
    r.add(&["aten::full_like"], full_like);
    r.add(&["aten::zeros_like", "aten::empty_like"], zeros_like);
    r.add(&["aten::ones_like"], ones_like);
    r.add(&["aten::scalar_tensor"], scalar_tensor);
    r.add(
        &[
            "aten::_to_copy",
            "aten::to",
            "aten::type_as",
            "aten::_to_dim_order_copy",
        ],
        to,
    );
}

/// The output dtype: the program's, else the argument `dtype`, else `default`.
fn dtype_of(ctx: &Ctx<'_>, node: &Node<'_>, default: DType) -> Result<DType> {
    Ok(match out_dtype(ctx, node, 0) {
        Some(d) => d,
        None => ctx.scalar_type(node, "dtype")?.unwrap_or(default),
    })
}

fn arange(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = dtype_of(ctx, node, DType::I64)?;
    let bound = |ctx: &mut Ctx<'_>, name: &str, default: f64| -> Result<TensorId> {
        match node.arg(name) {
            None | Some(crate::schema::Argument::None) => scalar(ctx, node, dtype, default),
            Some(_) => super::util::operand(ctx, node, name, dtype),
        }
    };
    let start = bound(ctx, "start", 0.0)?;
    let end = bound(ctx, "end", 0.0)?;
    let step = bound(ctx, "step", 1.0)?;
    Ok(vec![ctx.add(node, Range, &[start, end, step])?])
}

/// A tensor of `size` (argument `size`) filled with `value`.
fn filled(ctx: &mut Ctx<'_>, node: &Node<'_>, value: f64) -> Result<TensorId> {
    let dtype = dtype_of(ctx, node, DType::F32)?;
    let size = ctx.syms(node, "size")?.unwrap_or_default();
    let one = scalar(ctx, node, dtype, value)?;
    let fill = ctx
        .value(one)
        .map(|t| t.bytes().to_vec())
        .unwrap_or_default();
    if let Some(dims) = size
        .iter()
        .map(|s| match s {
            Sym::Known(v) => usize::try_from(*v).ok(),
            Sym::Tensor(_) => None,
        })
        .collect::<Option<Vec<usize>>>()
    {
        let n: usize = dims.iter().product();
        if n <= 1 << 20 {
            let bytes = fill.repeat(n);
            return ctx.constant(node, Tensor::from_bytes(dtype, &dims, &bytes)?);
        }
    }
    let shape = ctx.shape_tensor(node, &size)?;
    ctx.add(node, ConstantOfShape { dtype, value: fill }, &[shape])
}

/// A tensor shaped like `self`, filled with `value`.
fn filled_like(ctx: &mut Ctx<'_>, node: &Node<'_>, value: f64) -> Result<TensorId> {
    let x = ctx.tensor(node, "self")?;
    let dtype = dtype_of(ctx, node, ctx.dtype(x))?;
    let one = scalar(ctx, node, dtype, value)?;
    let fill = ctx
        .value(one)
        .map(|t| t.bytes().to_vec())
        .unwrap_or_default();
    let shape = ctx.add(
        node,
        Shape {
            start: 0,
            end: None,
        },
        &[x],
    )?;
    ctx.add(node, ConstantOfShape { dtype, value: fill }, &[shape])
}

fn fill_value(ctx: &Ctx<'_>, node: &Node<'_>) -> Result<f64> {
    ctx.float(node, "fill_value")?
        .ok_or_else(|| node.err("argument `fill_value` must be a number known at import time"))
}

fn full(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let v = fill_value(ctx, node)?;
    Ok(vec![filled(ctx, node, v)?])
}

fn zeros(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![filled(ctx, node, 0.0)?])
}

fn ones(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![filled(ctx, node, 1.0)?])
}

fn full_like(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let v = fill_value(ctx, node)?;
    Ok(vec![filled_like(ctx, node, v)?])
}

fn zeros_like(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![filled_like(ctx, node, 0.0)?])
}

fn ones_like(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![filled_like(ctx, node, 1.0)?])
}

fn scalar_tensor(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let dtype = dtype_of(ctx, node, DType::F32)?;
    let v = ctx
        .float(node, "s")?
        .ok_or_else(|| node.err("argument `s` must be known at import time"))?;
    Ok(vec![scalar(ctx, node, dtype, v)?])
}

/// A conversion to the program's output dtype (devices and layouts are the engine's).
fn to(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dtype = match out_dtype(ctx, node, 0) {
        Some(d) => d,
        None => match ctx.scalar_type(node, "dtype")? {
            Some(d) => d,
            None => match ctx.opt_tensor(node, "other")? {
                Some(o) => ctx.dtype(o),
                None => ctx.dtype(x),
            },
        },
    };
    Ok(vec![cast_to(ctx, node, x, dtype)?])
}
