//! Matrix products: `linear`, `addmm`, `mm`, `bmm`, `matmul`, `baddbmm`, `addmv`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp, MatMul};

use super::util::scalar;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.family("linear");
    r.add(&["aten::linear"], linear);
    r.add(&["aten::mm", "aten::bmm", "aten::matmul"], matmul);
    r.add(&["aten::addmm", "aten::baddbmm"], addmm);
}

fn mat(ctx: &mut Ctx<'_>, node: &Node<'_>, a: TensorId, b: TensorId, tb: bool) -> Result<TensorId> {
    let layer = MatMul {
        transpose_a: false,
        transpose_b: tb,
    };
    ctx.add(node, layer, &[a, b])
}

/// `input @ weight.T + bias`.
fn linear(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.tensor(node, "input")?;
    let w = ctx.tensor(node, "weight")?;
    let mut y = mat(ctx, node, x, w, true)?;
    if let Some(b) = ctx.opt_tensor(node, "bias")? {
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[y, b])?;
    }
    Ok(vec![y])
}

fn matmul(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let a = ctx.tensor(node, "self")?;
    let b = match ctx.opt_tensor(node, "mat2")? {
        Some(b) => b,
        None => ctx.tensor(node, "other")?,
    };
    Ok(vec![mat(ctx, node, a, b, false)?])
}

/// `beta·self + alpha·(mat1 @ mat2)` (`batch1 @ batch2` for `baddbmm`).
fn addmm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let bias = ctx.tensor(node, "self")?;
    let (a, b) = match ctx.opt_tensor(node, "mat1")? {
        Some(a) => (a, ctx.tensor(node, "mat2")?),
        None => (ctx.tensor(node, "batch1")?, ctx.tensor(node, "batch2")?),
    };
    let dtype = ctx.dtype(a);
    let mut p = mat(ctx, node, a, b, false)?;
    let alpha = ctx.float_or(node, "alpha", 1.0)?;
    if alpha != 1.0 {
        let s = scalar(ctx, node, dtype, alpha)?;
        p = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[p, s])?;
    }
    let mut c = bias;
    let beta = ctx.float_or(node, "beta", 1.0)?;
    if beta == 0.0 {
        return Ok(vec![p]);
    }
    if beta != 1.0 {
        let s = scalar(ctx, node, dtype, beta)?;
        c = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[c, s])?;
    }
    Ok(vec![ctx.add(
        node,
        Elementwise::new(ElementwiseOp::Add),
        &[p, c],
    )?])
}
