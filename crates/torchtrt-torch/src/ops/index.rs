//! Indexing and joining: `select`, `slice`, `narrow`, `index.Tensor` (adjacent integer
//! indices), `gather`, `index_select`, `cat`, `stack`, `split`/`chunk`/`unbind`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{
    Concat, Elementwise, ElementwiseOp, Gather, GatherElements, Reshape, Shape, Slice, Squeeze,
    Unsqueeze,
};
use torchtrt_core::plugin_api::DType;

use super::util::{axis, cast_to, i64s, out_dtype};
use crate::ctx::{Ctx, Sym};
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;
use crate::schema::{Argument, SymInt};

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("index");
    r.add(&["aten::select", "aten::select_copy"], select);
    r.add(&["aten::slice", "aten::slice_copy"], slice);
    r.add(&["aten::narrow", "aten::narrow_copy"], narrow);
    r.add(&["aten::index.Tensor", "aten::_unsafe_index.Tensor"], index);
    r.add(&["aten::gather"], gather);
    r.add(&["aten::index_select"], index_select);
    r.add(&["aten::cat", "aten::concat", "aten::concatenate"], cat);
    r.add(&["aten::stack"], stack);
    r.add(
        &[
            "aten::split",
            "aten::split_with_sizes",
            "aten::chunk",
            "aten::unbind",
        ],
        split,
    );
    r.add(
        &[
            "aten::split_copy",
            "aten::split_with_sizes_copy",
            "aten::unbind_copy",
        ],
        split,
    );
}

fn select(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, ctx.rank(x), "dim")?;
    let i = ctx
        .sym(node, "index")?
        .ok_or_else(|| node.err("argument `index` is required"))?;
    let i = ctx.sym_tensor(node, i)?;
    Ok(vec![ctx.add(node, Gather { axis: dim as i64 }, &[x, i])?])
}

/// A slice of `x` along `dim`; run-time bounds become the layer's inputs.
fn slice_along(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    dim: usize,
    start: Sym,
    end: Sym,
    step: i64,
) -> Result<TensorId> {
    if let (Sym::Known(s), Sym::Known(e)) = (start, end) {
        let layer = Slice {
            starts: vec![s],
            ends: vec![e],
            axes: vec![dim as i64],
            steps: vec![step],
        };
        return ctx.add(node, layer, &[x]);
    }
    let starts = ctx.shape_tensor(node, &[start])?;
    let ends = ctx.shape_tensor(node, &[end])?;
    let axes = i64s(ctx, node, &[dim as i64])?;
    let steps = i64s(ctx, node, &[step])?;
    ctx.add(node, Slice::default(), &[x, starts, ends, axes, steps])
}

fn slice(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, ctx.rank(x), "dim")?;
    let start = ctx.sym(node, "start")?.unwrap_or(Sym::Known(0));
    let end = ctx.sym(node, "end")?.unwrap_or(Sym::Known(i64::MAX));
    let step = ctx.int_or(node, "step", 1)?;
    if step < 1 {
        return Err(node.err(format!("step {step}: torch slices step forward")));
    }
    Ok(vec![slice_along(ctx, node, x, dim, start, end, step)?])
}

fn narrow(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, ctx.rank(x), "dim")?;
    let start = ctx
        .sym(node, "start")?
        .ok_or_else(|| node.err("argument `start` is required"))?;
    let length = ctx
        .sym(node, "length")?
        .ok_or_else(|| node.err("argument `length` is required"))?;
    let end = match (start, length) {
        (Sym::Known(s), Sym::Known(l)) => Sym::Known(s + l),
        (s, l) => {
            let (s, l) = (ctx.sym_tensor(node, s)?, ctx.sym_tensor(node, l)?);
            Sym::Tensor(ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[s, l])?)
        }
    };
    Ok(vec![slice_along(ctx, node, x, dim, start, end, 1)?])
}

/// `self[…, i₀, i₁, …]` with integer index tensors on adjacent dims `p..p+k` (broadcast
/// together): those dims are flattened and gathered by the linear index.
fn index(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    let indices = ctx.optional_tensors(node, "indices")?;
    let first = indices
        .iter()
        .position(Option::is_some)
        .ok_or_else(|| node.err("no index tensor"))?;
    let last = indices.iter().rposition(Option::is_some).unwrap_or(first);
    let idx: Vec<TensorId> = indices[first..=last]
        .iter()
        .map(|t| t.ok_or_else(|| node.err("index tensors separated by `None` (non-adjacent advanced indices) are not supported")))
        .collect::<Result<_>>()?;
    if idx
        .iter()
        .any(|&t| ctx.dtype(t) == DType::Bool || ctx.dtype(t) == DType::U8)
    {
        return Err(node.err(
            "boolean-mask indexing has a data-dependent output shape, which is not supported",
        ));
    }
    if last >= rank {
        return Err(node.err(format!("{} indices for a tensor of rank {rank}", last + 1)));
    }
    if idx.len() == 1 {
        let i = cast_to(ctx, node, idx[0], DType::I64)?;
        return Ok(vec![ctx.add(
            node,
            Gather { axis: first as i64 },
            &[x, i],
        )?]);
    }
    let mut linear: Option<TensorId> = None;
    for (k, &i) in idx.iter().enumerate() {
        let d = first + k;
        let size = ctx.add(
            node,
            Shape {
                start: d as i64,
                end: Some(d as i64 + 1),
            },
            &[x],
        )?;
        let size = ctx.add(
            node,
            Squeeze {
                axes: Some(vec![0]),
            },
            &[size],
        )?;
        let i = cast_to(ctx, node, i, DType::I64)?;
        let i = ctx.add(node, Elementwise::new(ElementwiseOp::Mod), &[i, size])?;
        linear = Some(match linear {
            None => i,
            Some(acc) => {
                let scaled = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[acc, size])?;
                ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[scaled, i])?
            }
        });
    }
    let mut parts = Vec::new();
    if first > 0 {
        parts.push(ctx.add(
            node,
            Shape {
                start: 0,
                end: Some(first as i64),
            },
            &[x],
        )?);
    }
    parts.push(i64s(ctx, node, &[-1])?);
    if last + 1 < rank {
        parts.push(ctx.add(
            node,
            Shape {
                start: last as i64 + 1,
                end: None,
            },
            &[x],
        )?);
    }
    let shape = ctx.add(node, Concat { axis: 0 }, &parts)?;
    let flat = ctx.add(
        node,
        Reshape {
            dims: Vec::new(),
            allow_zero: true,
        },
        &[x, shape],
    )?;
    let linear = linear.ok_or_else(|| node.err("no index tensor"))?;
    Ok(vec![ctx.add(
        node,
        Gather { axis: first as i64 },
        &[flat, linear],
    )?])
}

fn gather(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, ctx.rank(x), "dim")?;
    let i = ctx.tensor(node, "index")?;
    let i = cast_to(ctx, node, i, DType::I64)?;
    Ok(vec![ctx.add(
        node,
        GatherElements { axis: dim as i64 },
        &[x, i],
    )?])
}

fn index_select(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, ctx.rank(x), "dim")?;
    let i = ctx.tensor(node, "index")?;
    let i = cast_to(ctx, node, i, DType::I64)?;
    Ok(vec![ctx.add(node, Gather { axis: dim as i64 }, &[x, i])?])
}

fn cat(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let ts = ctx.tensors(node, "tensors")?;
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(ts[0]));
    let rank = ts.iter().map(|&t| ctx.rank(t)).max().unwrap_or(1);
    let mut ins = Vec::new();
    for t in ts {
        if ctx.rank(t) == 1 && ctx.known_shape(t) == Some(vec![0]) && rank > 1 {
            continue;
        }
        ins.push(cast_to(ctx, node, t, dtype)?);
    }
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, rank, "dim")?;
    Ok(vec![ctx.add(node, Concat { axis: dim as i64 }, &ins)?])
}

fn stack(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let ts = ctx.tensors(node, "tensors")?;
    let rank = ctx.rank(ts[0]);
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, rank + 1, "dim")?;
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(ts[0]));
    let mut ins = Vec::new();
    for t in ts {
        let t = cast_to(ctx, node, t, dtype)?;
        ins.push(ctx.add(
            node,
            Unsqueeze {
                axes: vec![dim as i64],
            },
            &[t],
        )?);
    }
    Ok(vec![ctx.add(node, Concat { axis: dim as i64 }, &ins)?])
}

/// `split`, `split_with_sizes`, `chunk` and `unbind`: the pieces' extents along `dim`
/// come from the program's output sizes, which must be known.
fn split(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, rank, "dim")?;
    let names: Vec<Option<&String>> = node
        .raw
        .outputs
        .iter()
        .flat_map(|a| match a {
            Argument::Tensors(ns) => ns.iter().map(Some).collect(),
            Argument::Tensor(n) => vec![Some(n)],
            _ => vec![None],
        })
        .collect();
    let unbind = node.op.name.starts_with("unbind");
    let mut outs = Vec::new();
    let mut start = 0i64;
    for name in names {
        let meta = name
            .and_then(|n| ctx.meta(n))
            .ok_or_else(|| node.err("an output has no metadata"))?;
        let extent = if unbind {
            1
        } else {
            match meta.sizes.get(dim) {
                Some(SymInt::Int(v)) => *v,
                _ => {
                    return Err(node.err(
                        "the pieces' extents along the split dim must be known at import time",
                    ));
                }
            }
        };
        let layer = Slice {
            starts: vec![start],
            ends: vec![start + extent],
            axes: vec![dim as i64],
            steps: vec![1],
        };
        let mut piece = ctx.add(node, layer, &[x])?;
        if unbind {
            piece = ctx.add(
                node,
                Squeeze {
                    axes: Some(vec![dim as i64]),
                },
                &[piece],
            )?;
        }
        outs.push(piece);
        start += extent;
    }
    Ok(outs)
}
