//! Reductions: `sum`, `mean`, `prod`, `amax`/`amin`, `max`/`min` (with indices),
//! `any`/`all`, `argmax`/`argmin`, and `linalg_vector_norm` onto the
//! `torch_tensorrt::NormalizePlugin` (mode `norm`).

use torchtrt_core::TensorId;
use torchtrt_core::layers::{ArgReduce, Reduce, ReduceOp};
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};

use super::util::{cast_to, out_dtype};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("reduce");
    r.add(&["aten::sum"], sum);
    r.add(&["aten::mean"], mean);
    r.add(&["aten::prod"], prod);
    r.add(&["aten::amax"], amax);
    r.add(&["aten::amin"], amin);
    r.add(&["aten::max"], max);
    r.add(&["aten::min"], min);
    r.add(&["aten::any"], any);
    r.add(&["aten::all"], all);
    r.add(&["aten::argmax"], argmax);
    r.add(&["aten::argmin"], argmin);
    r.add(&["aten::linalg_vector_norm", "aten::norm"], vector_norm);
}

/// The axes of argument `dim` (absent or empty: all).
fn axes(ctx: &Ctx<'_>, node: &Node<'_>) -> Result<Vec<i64>> {
    Ok(ctx.ints(node, "dim")?.unwrap_or_default())
}

fn reduce(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ReduceOp) -> Result<TensorId> {
    let x = ctx.tensor(node, "self")?;
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(x));
    let x = if dtype == DType::Bool {
        x
    } else {
        cast_to(ctx, node, x, dtype)?
    };
    let layer = Reduce {
        op,
        axes: axes(ctx, node)?,
        keep_dims: ctx.bool_or(node, "keepdim", false)?,
    };
    ctx.add(node, layer, &[x])
}

fn sum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![reduce(ctx, node, ReduceOp::Sum)?])
}

fn mean(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![reduce(ctx, node, ReduceOp::Mean)?])
}

fn prod(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![reduce(ctx, node, ReduceOp::Prod)?])
}

fn amax(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![reduce(ctx, node, ReduceOp::Max)?])
}

fn amin(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    Ok(vec![reduce(ctx, node, ReduceOp::Min)?])
}

/// `max.dim` (values and indices), `max.default` (everything), `max.other` (element-wise).
fn extremum(ctx: &mut Ctx<'_>, node: &Node<'_>, is_max: bool) -> Result<Vec<TensorId>> {
    if node.arg("other").is_some() {
        let op = if is_max { "maximum" } else { "minimum" };
        return Err(node.err(format!("use aten::{op} for the element-wise form")));
    }
    let x = ctx.tensor(node, "self")?;
    let op = if is_max { ReduceOp::Max } else { ReduceOp::Min };
    let keep = ctx.bool_or(node, "keepdim", false)?;
    let Some(dim) = ctx.int(node, "dim")? else {
        return Ok(vec![ctx.add(
            node,
            Reduce {
                op,
                axes: Vec::new(),
                keep_dims: false,
            },
            &[x],
        )?]);
    };
    let values = ctx.add(
        node,
        Reduce {
            op,
            axes: vec![dim],
            keep_dims: keep,
        },
        &[x],
    )?;
    let arg = ArgReduce {
        max: is_max,
        axis: dim,
        keep_dims: keep,
        select_last_index: false,
    };
    let indices = ctx.add(node, arg, &[x])?;
    Ok(vec![values, indices])
}

fn max(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    extremum(ctx, node, true)
}

fn min(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    extremum(ctx, node, false)
}

/// `any`/`all` as a max/min over the values cast to i32, cast back to bool.
fn boolean(ctx: &mut Ctx<'_>, node: &Node<'_>, op: ReduceOp) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let nonzero = if ctx.dtype(x) == DType::Bool {
        x
    } else {
        cast_to(ctx, node, x, DType::Bool)?
    };
    let i = cast_to(ctx, node, nonzero, DType::I32)?;
    let axes = ctx.ints(node, "dim")?.unwrap_or_default();
    let layer = Reduce {
        op,
        axes,
        keep_dims: ctx.bool_or(node, "keepdim", false)?,
    };
    let r = ctx.add(node, layer, &[i])?;
    Ok(vec![cast_to(ctx, node, r, DType::Bool)?])
}

fn any(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    boolean(ctx, node, ReduceOp::Max)
}

fn all(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    boolean(ctx, node, ReduceOp::Min)
}

fn arg(ctx: &mut Ctx<'_>, node: &Node<'_>, is_max: bool) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let keep = ctx.bool_or(node, "keepdim", false)?;
    let (x, dim) = match ctx.int(node, "dim")? {
        Some(d) => (x, d),
        None => {
            let flat = ctx.add(node, torchtrt_core::layers::Reshape::new(vec![-1]), &[x])?;
            (flat, 0)
        }
    };
    let layer = ArgReduce {
        max: is_max,
        axis: dim,
        keep_dims: keep,
        select_last_index: false,
    };
    Ok(vec![ctx.add(node, layer, &[x])?])
}

fn argmax(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    arg(ctx, node, true)
}

fn argmin(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    arg(ctx, node, false)
}

/// `linalg_vector_norm(self, ord, dim, keepdim)` → `NormalizePlugin` (mode `norm`).
fn vector_norm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let order = match ctx.float(node, "ord")? {
        Some(o) => o,
        None => ctx.float_or(node, "p", 2.0)?,
    };
    if order <= 0.0 {
        return Err(node.err(format!(
            "ord {order}: only positive orders (and inf) are supported"
        )));
    }
    let rank = ctx.rank(x) as i32;
    let axes: Vec<i32> = match ctx.ints(node, "dim")? {
        Some(d) if !d.is_empty() => d.iter().map(|&a| a as i32).collect(),
        _ => (0..rank).collect(),
    };
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(x));
    let x = cast_to(ctx, node, x, dtype)?;
    let fields = FieldCollection::new()
        .with("order", order as f32)
        .with("axes", axes)
        .with("keep_dims", i32::from(ctx.bool_or(node, "keepdim", false)?))
        .with("mode", "norm");
    let key = PluginKey::new("torch_tensorrt", "NormalizePlugin", "1");
    Ok(vec![ctx.plugin(node, &key, &fields, &[x])?[0]])
}
