//! Shape and layout: `view`/`reshape`, `flatten`/`unflatten`, `squeeze`/`unsqueeze`,
//! `expand`, `permute`/`transpose`/`t`, and the ops that are the identity on values
//! (`contiguous`, `clone`, `alias`, `detach`, `dropout` in inference). Sizes computed at
//! run time become shape tensors.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Concat, Expand, Reshape, Shape, Squeeze, Transpose, Unsqueeze};

use super::util::{axis, i64s, out_static_shape};
use crate::ctx::{Ctx, Sym};
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("view");
    r.add(
        &[
            "aten::view",
            "aten::reshape",
            "aten::_unsafe_view",
            "aten::_reshape_copy",
        ],
        reshape,
    );
    r.add(&["aten::view_copy"], reshape);
    r.add(&["aten::flatten"], flatten);
    r.add(&["aten::unflatten"], unflatten);
    r.add(
        &["aten::squeeze", "aten::squeeze_", "aten::squeeze_copy"],
        squeeze,
    );
    r.add(
        &[
            "aten::unsqueeze",
            "aten::unsqueeze_",
            "aten::unsqueeze_copy",
        ],
        unsqueeze,
    );
    r.add(&["aten::expand", "aten::expand_copy"], expand);
    r.add(&["aten::expand_as"], expand_as);
    r.add(&["aten::view_as", "aten::reshape_as"], view_as);
    r.add(&["aten::permute", "aten::permute_copy"], permute);
    r.add(
        &[
            "aten::transpose",
            "aten::transpose_",
            "aten::transpose_copy",
            "aten::swapaxes",
        ],
        transpose,
    );
    r.add(&["aten::t", "aten::t_copy", "aten::numpy_T"], t);
    r.add(
        &[
            "aten::contiguous",
            "aten::clone",
            "aten::alias",
            "aten::alias_copy",
            "aten::detach",
            "aten::detach_",
            "aten::lift_fresh_copy",
            "aten::dropout",
            "aten::dropout_",
            "aten::feature_dropout",
            "aten::alpha_dropout",
            "aten::native_dropout",
        ],
        identity,
    );
}

/// The shape the program gives the output, or `sizes` with run-time entries.
fn reshape_to(ctx: &mut Ctx<'_>, node: &Node<'_>, x: TensorId, sizes: &[Sym]) -> Result<TensorId> {
    let known: Option<Vec<i64>> = sizes
        .iter()
        .map(|s| match s {
            Sym::Known(v) => Some(*v),
            Sym::Tensor(_) => None,
        })
        .collect();
    match known {
        Some(dims) => ctx.add(
            node,
            Reshape {
                dims,
                allow_zero: true,
            },
            &[x],
        ),
        None => {
            let shape = ctx.shape_tensor(node, sizes)?;
            ctx.add(
                node,
                Reshape {
                    dims: Vec::new(),
                    allow_zero: true,
                },
                &[x, shape],
            )
        }
    }
}

fn reshape(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let sizes = match ctx.syms(node, "size")? {
        Some(s) => s,
        None => ctx
            .syms(node, "shape")?
            .ok_or_else(|| node.err("argument `size` is required"))?,
    };
    if let Some(static_shape) = out_static_shape(ctx, node, 0) {
        let dims = static_shape;
        return Ok(vec![ctx.add(
            node,
            Reshape {
                dims,
                allow_zero: true,
            },
            &[x],
        )?]);
    }
    Ok(vec![reshape_to(ctx, node, x, &sizes)?])
}

/// `x`'s shape with axes `start..=end` replaced by `middle` (a 1-D i64 tensor).
fn splice_shape(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    x: TensorId,
    start: usize,
    end: usize,
    middle: TensorId,
) -> Result<TensorId> {
    let rank = ctx.rank(x) as i64;
    let mut parts = Vec::new();
    if start > 0 {
        parts.push(ctx.add(
            node,
            Shape {
                start: 0,
                end: Some(start as i64),
            },
            &[x],
        )?);
    }
    parts.push(middle);
    if (end as i64) + 1 < rank {
        parts.push(ctx.add(
            node,
            Shape {
                start: end as i64 + 1,
                end: None,
            },
            &[x],
        )?);
    }
    ctx.add(node, Concat { axis: 0 }, &parts)
}

fn flatten(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    if rank == 0 {
        return Ok(vec![ctx.add(node, Reshape::new(vec![1]), &[x])?]);
    }
    let start = axis(node, ctx.int_or(node, "start_dim", 0)?, rank, "start_dim")?;
    let end = axis(node, ctx.int_or(node, "end_dim", -1)?, rank, "end_dim")?;
    if start > end {
        return Err(node.err(format!("start_dim {start} is after end_dim {end}")));
    }
    if let Some(dims) = out_static_shape(ctx, node, 0) {
        return Ok(vec![ctx.add(
            node,
            Reshape {
                dims,
                allow_zero: true,
            },
            &[x],
        )?]);
    }
    let middle = i64s(ctx, node, &[-1])?;
    let shape = splice_shape(ctx, node, x, start, end, middle)?;
    Ok(vec![ctx.add(
        node,
        Reshape {
            dims: Vec::new(),
            allow_zero: true,
        },
        &[x, shape],
    )?])
}

fn unflatten(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    let dim = axis(node, ctx.int_or(node, "dim", 0)?, rank, "dim")?;
    let sizes = ctx
        .syms(node, "sizes")?
        .ok_or_else(|| node.err("argument `sizes` is required"))?;
    if let Some(dims) = out_static_shape(ctx, node, 0) {
        return Ok(vec![ctx.add(
            node,
            Reshape {
                dims,
                allow_zero: true,
            },
            &[x],
        )?]);
    }
    let middle = ctx.shape_tensor(node, &sizes)?;
    let shape = splice_shape(ctx, node, x, dim, dim, middle)?;
    Ok(vec![ctx.add(
        node,
        Reshape {
            dims: Vec::new(),
            allow_zero: true,
        },
        &[x, shape],
    )?])
}

/// torch's `squeeze` drops the given axes that have size 1 and ignores the others; which
/// were dropped follows from the program's output rank.
fn squeeze(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    let given = ctx.ints(node, "dim")?;
    let candidates: Vec<usize> = match given {
        Some(dims) => dims
            .iter()
            .map(|&d| axis(node, d, rank, "dim"))
            .collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    let ones: Vec<i64> = candidates
        .iter()
        .filter(|&&a| ctx.ty(x).shape[a].as_const() == Some(1))
        .map(|&a| a as i64)
        .collect();
    if ones.is_empty() {
        return identity(ctx, node);
    }
    Ok(vec![ctx.add(node, Squeeze { axes: Some(ones) }, &[x])?])
}

fn unsqueeze(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let d = ctx
        .int(node, "dim")?
        .ok_or_else(|| node.err("argument `dim` is required"))?;
    let a = axis(node, d, ctx.rank(x) + 1, "dim")?;
    Ok(vec![ctx.add(
        node,
        Unsqueeze {
            axes: vec![a as i64],
        },
        &[x],
    )?])
}

/// `expand(self, size)`: `-1` keeps a dim (broadcasting against 1 does).
fn expand(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let sizes = ctx
        .syms(node, "size")?
        .ok_or_else(|| node.err("argument `size` is required"))?;
    let sizes: Vec<Sym> = sizes
        .into_iter()
        .map(|s| {
            if s == Sym::Known(-1) {
                Sym::Known(1)
            } else {
                s
            }
        })
        .collect();
    let shape = ctx.shape_tensor(node, &sizes)?;
    Ok(vec![ctx.add(node, Expand, &[x, shape])?])
}

fn expand_as(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let other = ctx.tensor(node, "other")?;
    let shape = ctx.add(
        node,
        Shape {
            start: 0,
            end: None,
        },
        &[other],
    )?;
    Ok(vec![ctx.add(node, Expand, &[x, shape])?])
}

/// `view_as(self, other)`: `self` in `other`'s shape.
fn view_as(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let other = ctx.tensor(node, "other")?;
    let shape = ctx.add(
        node,
        Shape {
            start: 0,
            end: None,
        },
        &[other],
    )?;
    let layer = Reshape {
        dims: Vec::new(),
        allow_zero: true,
    };
    Ok(vec![ctx.add(node, layer, &[x, shape])?])
}

fn permute(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    let dims = ctx
        .ints(node, "dims")?
        .ok_or_else(|| node.err("argument `dims` is required"))?;
    let perm = dims
        .iter()
        .map(|&d| axis(node, d, rank, "dims"))
        .collect::<Result<Vec<_>>>()?;
    Ok(vec![ctx.add(node, Transpose { perm }, &[x])?])
}

fn transpose(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    if rank < 2 {
        return identity(ctx, node);
    }
    let a = axis(node, ctx.int_or(node, "dim0", 0)?, rank, "dim0")?;
    let b = axis(node, ctx.int_or(node, "dim1", 1)?, rank, "dim1")?;
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(a, b);
    Ok(vec![ctx.add(node, Transpose { perm }, &[x])?])
}

fn t(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    if rank < 2 {
        return identity(ctx, node);
    }
    let perm: Vec<usize> = (0..rank).rev().collect();
    Ok(vec![ctx.add(node, Transpose { perm }, &[x])?])
}

fn identity(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = match ctx.opt_tensor(node, "self")? {
        Some(x) => x,
        None => ctx.tensor(node, "input")?,
    };
    if node.op.name.contains("dropout") && ctx.bool_or(node, "train", false)? {
        return Err(node.err("dropout in training mode: export the model in eval mode"));
    }
    Ok(vec![x])
}
