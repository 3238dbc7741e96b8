//! `repeat`, `constant_pad_nd`, `tril`/`triu` and `cumsum`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{CumSum, Pad, PadMode, Tile, Trilu, Unsqueeze};

use super::util::{cast_to, i64s, out_dtype, scalar};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("misc");
    r.add(&["aten::repeat"], repeat);
    r.add(&["aten::constant_pad_nd", "aten::pad"], pad);
    r.add(&["aten::tril", "aten::tril_"], tril);
    r.add(&["aten::triu", "aten::triu_"], triu);
    r.add(&["aten::cumsum", "aten::cumsum_"], cumsum);
}

/// `repeat(self, repeats)`: leading axes are added when `repeats` is longer.
fn repeat(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let mut x = ctx.tensor(node, "self")?;
    let reps = ctx
        .syms(node, "repeats")?
        .ok_or_else(|| node.err("argument `repeats` is required"))?;
    let rank = ctx.rank(x);
    if reps.len() < rank {
        return Err(node.err(format!(
            "{} repeats for a tensor of rank {rank}",
            reps.len()
        )));
    }
    if reps.len() > rank {
        let axes = (0..(reps.len() - rank) as i64).collect();
        x = ctx.add(node, Unsqueeze { axes }, &[x])?;
    }
    let reps = ctx.shape_tensor(node, &reps)?;
    Ok(vec![ctx.add(node, Tile, &[x, reps])?])
}

/// `constant_pad_nd(self, pad, value)`: `pad` holds (before, after) pairs from the last
/// axis backwards; negative entries crop.
fn pad(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let rank = ctx.rank(x);
    let p = ctx
        .ints(node, "pad")?
        .ok_or_else(|| node.err("argument `pad` is required"))?;
    if p.len() % 2 != 0 || p.len() / 2 > rank {
        return Err(node.err(format!("pad {p:?} for a tensor of rank {rank}")));
    }
    if let Some(mode) = ctx.string(node, "mode")?
        && mode != "constant"
    {
        return Err(node.err(format!(
            "pad mode `{mode}`: only constant padding is supported"
        )));
    }
    let mut pads = vec![0i64; 2 * rank];
    for (k, pair) in p.chunks(2).enumerate() {
        let a = rank - 1 - k;
        pads[a] = pair[0];
        pads[rank + a] = pair[1];
    }
    let pads = i64s(ctx, node, &pads)?;
    let dtype = ctx.dtype(x);
    let value = scalar(ctx, node, dtype, ctx.float_or(node, "value", 0.0)?)?;
    Ok(vec![ctx.add(
        node,
        Pad {
            mode: PadMode::Constant,
        },
        &[x, pads, value],
    )?])
}

fn triangle(ctx: &mut Ctx<'_>, node: &Node<'_>, upper: bool) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let k = ctx.int_or(node, "diagonal", 0)?;
    let k = ctx.constant(node, torchtrt_core::Tensor::scalar(k))?;
    Ok(vec![ctx.add(node, Trilu { upper }, &[x, k])?])
}

fn tril(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    triangle(ctx, node, false)
}

fn triu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    triangle(ctx, node, true)
}

fn cumsum(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "self")?;
    let dtype = out_dtype(ctx, node, 0).unwrap_or(ctx.dtype(x));
    let x = cast_to(ctx, node, x, dtype)?;
    let dim = ctx
        .int(node, "dim")?
        .ok_or_else(|| node.err("argument `dim` is required"))?;
    let axis = ctx.constant(node, torchtrt_core::Tensor::scalar(dim))?;
    Ok(vec![ctx.add(
        node,
        CumSum {
            exclusive: false,
            reverse: false,
        },
        &[x, axis],
    )?])
}
