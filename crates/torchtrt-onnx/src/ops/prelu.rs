//! `PRelu`: `x < 0 ? slope · x : x`. Before opset 7 a 1-D slope of `C` values runs along
//! the channel axis; later, slopes broadcast numpy-style.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp};

use super::params::per_channel;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("PRelu", prelu);
}

fn prelu(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let (x, mut slope) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let rank = ctx.rank(x);
    let per_channel_slope = ctx.opset() < 7
        && rank > 2
        && ctx.rank(slope) == 1
        && ctx.ty(slope).shape[0].as_const().is_some_and(|n| n > 1);
    if per_channel_slope {
        slope = per_channel(ctx, node, slope, rank)?;
    }
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::PRelu),
        &[x, slope],
    )?])
}
