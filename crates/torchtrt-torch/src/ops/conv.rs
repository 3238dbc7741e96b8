//! Convolutions: `conv1d/2d/3d`, `convolution` (with `transposed`) and `conv_transpose*`,
//! with string padding (`valid`, `same`) for the `.padding` overloads.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Convolution, Deconvolution};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("conv");
    r.add(
        &[
            "aten::conv1d",
            "aten::conv2d",
            "aten::conv3d",
            "aten::_convolution",
        ],
        conv,
    );
    r.add(&["aten::convolution"], conv);
    r.add(
        &[
            "aten::conv_transpose1d",
            "aten::conv_transpose2d",
            "aten::conv_transpose3d",
        ],
        conv_transpose,
    );
}

/// `value` given once for every spatial dim, or per dim.
fn per_dim(
    node: &Node<'_>,
    what: &str,
    v: Option<Vec<i64>>,
    n: usize,
    default: i64,
) -> Result<Vec<i64>> {
    match v {
        None => Ok(vec![default; n]),
        Some(v) if v.len() == n => Ok(v),
        Some(v) if v.len() == 1 => Ok(vec![v[0]; n]),
        Some(v) => Err(node.err(format!(
            "`{what}` has {} entries for {n} spatial dims",
            v.len()
        ))),
    }
}

fn spatial(ctx: &Ctx<'_>, node: &Node<'_>, w: TensorId) -> Result<(usize, Vec<i64>)> {
    let shape = ctx
        .known_shape(w)
        .ok_or_else(|| node.err("the weight's shape must be known at import time"))?;
    let n = shape.len().saturating_sub(2);
    if !(1..=3).contains(&n) {
        return Err(node.err(format!(
            "weight of rank {}: 1 to 3 spatial dims are supported",
            shape.len()
        )));
    }
    Ok((n, shape[2..].to_vec()))
}

fn conv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    if ctx.bool_or(node, "transposed", false)? {
        return conv_transpose(ctx, node);
    }
    let x = ctx.tensor(node, "input")?;
    let w = ctx.tensor(node, "weight")?;
    let (n, kernel) = spatial(ctx, node, w)?;
    let strides = per_dim(node, "stride", ctx.ints(node, "stride")?, n, 1)?;
    let dilations = per_dim(node, "dilation", ctx.ints(node, "dilation")?, n, 1)?;
    let mode = match node.arg("padding") {
        Some(crate::schema::Argument::String(m)) => Some(m.clone()),
        _ => None,
    };
    let (pads_begin, pads_end) = match mode {
        Some(mode) if mode == "valid" => (vec![0; n], vec![0; n]),
        Some(mode) if mode == "same" => {
            let total: Vec<i64> = kernel
                .iter()
                .zip(&dilations)
                .map(|(k, d)| d * (k - 1))
                .collect();
            (
                total.iter().map(|t| t / 2).collect(),
                total.iter().map(|t| t - t / 2).collect(),
            )
        }
        Some(other) => return Err(node.err(format!("padding `{other}` is not valid or same"))),
        None => {
            let p = per_dim(node, "padding", ctx.ints(node, "padding")?, n, 0)?;
            (p.clone(), p)
        }
    };
    let layer = Convolution {
        strides,
        pads_begin,
        pads_end,
        dilations,
        groups: ctx.int_or(node, "groups", 1)?,
        activation: None,
        channels_last: false,
    };
    let mut ins = vec![x, w];
    ins.extend(ctx.opt_tensor(node, "bias")?);
    Ok(vec![ctx.add(node, layer, &ins)?])
}

fn conv_transpose(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "input")?;
    let w = ctx.tensor(node, "weight")?;
    let (n, _) = spatial(ctx, node, w)?;
    let pads = per_dim(node, "padding", ctx.ints(node, "padding")?, n, 0)?;
    let layer = Deconvolution {
        strides: per_dim(node, "stride", ctx.ints(node, "stride")?, n, 1)?,
        pads_begin: pads.clone(),
        pads_end: pads,
        dilations: per_dim(node, "dilation", ctx.ints(node, "dilation")?, n, 1)?,
        output_padding: per_dim(
            node,
            "output_padding",
            ctx.ints(node, "output_padding")?,
            n,
            0,
        )?,
        groups: ctx.int_or(node, "groups", 1)?,
    };
    let mut ins = vec![x, w];
    ins.extend(ctx.opt_tensor(node, "bias")?);
    Ok(vec![ctx.add(node, layer, &ins)?])
}
