//! `Reduce*` (axes as an attribute before opset 13 for ReduceSum and 18 for the others, as
//! an input after, known at import time or not), and `ArgMax` / `ArgMin`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{ArgReduce, Reduce, ReduceOp, Unary, UnaryOp};
use torchtrt_core::plugin_api::DType;

use super::util::cast_to;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    macro_rules! reduce {
        ($($name:literal => $op:ident),*) => {$(
            r.add($name, |ctx, node| Ok(vec![reduce(ctx, node, ReduceOp::$op)?]));
        )*};
    }
    reduce!("ReduceSum" => Sum, "ReduceMean" => Mean, "ReduceMax" => Max, "ReduceMin" => Min,
        "ReduceProd" => Prod, "ReduceL1" => L1, "ReduceL2" => L2,
        "ReduceSumSquare" => SumSquare, "ReduceLogSumExp" => LogSumExp);
    r.add("ReduceLogSum", |ctx, node| {
        let sum = reduce(ctx, node, ReduceOp::Sum)?;
        Ok(vec![ctx.add(node, Unary { op: UnaryOp::Log }, &[sum])?])
    });
    r.add("ArgMax", |ctx, node| arg(ctx, node, true));
    r.add("ArgMin", |ctx, node| arg(ctx, node, false));
}

/// The axes of a reduction: an attribute, or input 1 (a layer input when its value is only
/// known at run time).
enum Axes {
    /// Known at import time; empty means all.
    Known(Vec<i64>),
    /// A tensor of a known, non-zero length.
    Input(TensorId),
}

fn axes(ctx: &Ctx<'_>, node: &Node<'_>) -> Result<Axes> {
    if let Some(a) = node.ints("axes")? {
        return Ok(Axes::Known(a));
    }
    let Some(t) = ctx.opt_input(node, 1)? else {
        return Ok(Axes::Known(Vec::new()));
    };
    if let Some(a) = ctx.value_i64s(t) {
        return Ok(Axes::Known(a));
    }
    match ctx.known_shape(t).as_deref() {
        Some([0]) => Ok(Axes::Known(Vec::new())),
        Some([_]) => Ok(Axes::Input(t)),
        _ => Err(node.err("input 1 (`axes`) must be 1-D with a length known at import time")),
    }
}

/// One reduction of input 0. Empty axes reduce everything, or nothing with
/// `noop_with_empty_axes`. Bool max/min reduce the values as u8.
fn reduce(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ReduceOp) -> Result<TensorId> {
    let x = ctx.input(node, 0)?;
    let keep_dims = node.bool_or("keepdims", true)?;
    let (layer, axes_input) = match axes(ctx, node)? {
        Axes::Known(a) if a.is_empty() && node.bool_or("noop_with_empty_axes", false)? => {
            return Ok(x);
        }
        Axes::Known(axes) => (
            Reduce {
                op,
                axes,
                keep_dims,
            },
            None,
        ),
        Axes::Input(t) => (
            Reduce {
                op,
                axes: Vec::new(),
                keep_dims,
            },
            Some(t),
        ),
    };
    let dtype = ctx.ty(x).dtype;
    let boolean = dtype == DType::Bool && matches!(op, ReduceOp::Max | ReduceOp::Min);
    let xr = if boolean {
        cast_to(ctx, node, x, DType::U8)?
    } else {
        x
    };
    let mut ins = vec![xr];
    ins.extend(axes_input);
    let y = ctx.add(node, layer, &ins)?;
    if boolean {
        cast_to(ctx, node, y, DType::Bool)
    } else {
        Ok(y)
    }
}

/// `ArgMax` (`max`) or `ArgMin` along `axis`.
fn arg(ctx: &mut Ctx<'_>, node: &Node<'_>, max: bool) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let layer = ArgReduce {
        max,
        axis: node.int_or("axis", 0)?,
        keep_dims: node.bool_or("keepdims", true)?,
        select_last_index: node.bool_or("select_last_index", false)?,
    };
    Ok(vec![ctx.add(node, layer, &[x])?])
}
