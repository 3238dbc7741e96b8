//! `DepthToSpace` and `SpaceToDepth` (DCR or CRD channel order).

use torchtrt_core::TensorId;
use torchtrt_core::layers::{
    DepthToSpace, DepthToSpaceMode, Reshape, Shape, SpaceToDepth, Transpose,
};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("DepthToSpace", depth_to_space);
    r.add("SpaceToDepth", space_to_depth);
}

fn blocksize(node: &Node<'_>) -> Result<i64> {
    node.int("blocksize")?
        .ok_or_else(|| node.err("attribute `blocksize` is required"))
}

fn mode(node: &Node<'_>) -> Result<DepthToSpaceMode> {
    match node.string_or("mode", "DCR")?.as_str() {
        "DCR" => Ok(DepthToSpaceMode::Dcr),
        "CRD" => Ok(DepthToSpaceMode::Crd),
        other => Err(node.err(format!("unknown mode `{other}` (expected DCR or CRD)"))),
    }
}

fn depth_to_space(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let layer = DepthToSpace {
        blocksize: blocksize(node)?,
        mode: mode(node)?,
    };
    Ok(vec![ctx.add(node, layer, &[x])?])
}

/// `SpaceToDepth`; CRD order is the DCR layer's output with its channels, seen as
/// `[b², C]`, transposed to `[C, b²]` (which needs `C` known at import time).
fn space_to_depth(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let b = blocksize(node)?;
    let y = ctx.add(node, SpaceToDepth { blocksize: b }, &[x])?;
    if mode(node)? == DepthToSpaceMode::Dcr {
        return Ok(vec![y]);
    }
    let c = ctx.ty(x).shape[1]
        .as_const()
        .ok_or_else(|| node.err("mode CRD needs the channel count known at import time"))?;
    let split = ctx.add(node, Reshape::new(vec![0, b * b, c, -1]), &[y])?;
    let swapped = ctx.add(
        node,
        Transpose {
            perm: vec![0, 2, 1, 3],
        },
        &[split],
    )?;
    let out = match ctx.known_shape(y) {
        Some(dims) => ctx.add(node, Reshape::new(dims), &[swapped])?,
        None => {
            let shape = ctx.add(node, Shape::default(), &[y])?;
            ctx.add(node, Reshape::default(), &[swapped, shape])?
        }
    };
    Ok(vec![out])
}
