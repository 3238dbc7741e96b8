//! `Conv` and `ConvTranspose`, 1-D to 3-D, with groups, dilations and every `auto_pad`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Convolution, Deconvolution};

use super::window::{AutoPad, explicit_pads, fit, known_spatial, per_dim, window};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Conv", conv);
    r.add("ConvTranspose", conv_transpose);
}

/// The node's inputs `X`, `W` and the optional bias `B`.
fn operands(ctx: &Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let mut ins = vec![ctx.input(node, 0)?, ctx.input(node, 1)?];
    ins.extend(ctx.opt_input(node, 2)?);
    Ok(ins)
}

/// The taps per spatial dim: the weights' trailing dims, checked against `kernel_shape`.
fn kernel(ctx: &Ctx<'_>, node: &Node<'_>, x: TensorId, w: TensorId) -> Result<Vec<i64>> {
    let spatial = ctx.rank(x).saturating_sub(2);
    if !(1..=3).contains(&spatial) || ctx.rank(w) != ctx.rank(x) {
        return Err(node.err(format!(
            "X must be [N, C, 1 to 3 spatial dims] and W of the same rank, got ranks {} and {}",
            ctx.rank(x),
            ctx.rank(w)
        )));
    }
    let from_w: Option<Vec<i64>> = ctx.ty(w).shape[2..].iter().map(|d| d.as_const()).collect();
    match (node.ints("kernel_shape")?, from_w) {
        (Some(k), Some(w)) if k != w => Err(node.err(format!(
            "kernel_shape {k:?} differs from the weights' spatial dims {w:?}"
        ))),
        (_, Some(w)) => Ok(w),
        (Some(_), None) | (None, None) => {
            Err(node.err("the weights' shape must be known at import time"))
        }
    }
}

fn conv(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let ins = operands(ctx, node)?;
    let k = kernel(ctx, node, ins[0], ins[1])?;
    let w = window(ctx, node, ins[0], k)?;
    let layer = Convolution {
        strides: w.strides,
        pads_begin: w.pads_begin,
        pads_end: w.pads_end,
        dilations: w.dilations,
        groups: node.int_or("group", 1)?,
        activation: None,
        channels_last: false,
    };
    Ok(vec![ctx.add(node, layer, &ins)?])
}

/// `ConvTranspose`: explicit pads, or pads derived from `output_shape` / `SAME_*` so the
/// output has the asked extent (an extent beyond the natural one becomes output padding).
fn conv_transpose(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let ins = operands(ctx, node)?;
    let x = ins[0];
    let k = kernel(ctx, node, x, ins[1])?;
    let spatial = k.len();
    let mut output_padding = per_dim(node, "output_padding", spatial, 0)?;
    let output_shape = node.ints("output_shape")?;
    let auto_pad = AutoPad::of(node)?;
    let strides = per_dim(node, "strides", spatial, 1)?;
    let dilations = per_dim(node, "dilations", spatial, 1)?;
    let (mut pads_begin, mut pads_end) = match auto_pad {
        AutoPad::NotSet => explicit_pads(node, spatial)?,
        _ => (vec![0; spatial], vec![0; spatial]),
    };
    if output_shape.is_some() || auto_pad.is_same() {
        let input = known_spatial(ctx, node, x, "output_shape or auto_pad SAME_*")?;
        let target = match output_shape {
            Some(s) if s.len() >= spatial => s[s.len() - spatial..].to_vec(),
            Some(s) => {
                return Err(node.err(format!(
                    "output_shape {s:?} has fewer than {spatial} spatial dims"
                )));
            }
            None => input
                .iter()
                .zip(&strides)
                .map(|(&i, &s)| fit(node, i128::from(i) * i128::from(s)))
                .collect::<Result<_>>()?,
        };
        for i in 0..spatial {
            let [n, s, op, k, d] =
                [input[i], strides[i], output_padding[i], k[i], dilations[i]].map(i128::from);
            let total = fit(
                node,
                s * (n - 1) + op + (k - 1) * d + 1 - i128::from(target[i]),
            )?;
            if total >= 0 {
                (pads_begin[i], pads_end[i]) = auto_pad.split(total);
            } else {
                (pads_begin[i], pads_end[i]) = (0, 0);
                output_padding[i] = fit(node, i128::from(output_padding[i]) - i128::from(total))?;
            }
        }
    }
    let layer = Deconvolution {
        strides,
        pads_begin,
        pads_end,
        dilations,
        output_padding,
        groups: node.int_or("group", 1)?,
    };
    Ok(vec![ctx.add(node, layer, &ins)?])
}
