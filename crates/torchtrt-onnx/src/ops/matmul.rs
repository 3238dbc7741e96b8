//! MatMul and Gemm.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Elementwise, ElementwiseOp, MatMul};

use super::util::scalar;
use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("MatMul", |ctx, node| {
        let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
        Ok(vec![ctx.add(node, MatMul::default(), &[a, b])?])
    });
    r.add("Gemm", gemm);
}

/// `alpha·op(A)·op(B) + beta·C`.
fn gemm(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let (a, b) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
    let mm = MatMul {
        transpose_a: node.int_or("transA", 0)? != 0,
        transpose_b: node.int_or("transB", 0)? != 0,
    };
    let alpha = node.float_or("alpha", 1.0)?;
    let beta = node.float_or("beta", 1.0)?;
    let dtype = ctx.ty(a).dtype;
    let mut y = ctx.add(node, mm, &[a, b])?;
    if alpha != 1.0 {
        let s = scalar(ctx, node, dtype, alpha as f64)?;
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[y, s])?;
    }
    if let Some(mut c) = ctx.opt_input(node, 2)? {
        if beta != 1.0 {
            let s = scalar(ctx, node, dtype, beta as f64)?;
            c = ctx.add(node, Elementwise::new(ElementwiseOp::Mul), &[c, s])?;
        }
        y = ctx.add(node, Elementwise::new(ElementwiseOp::Add), &[y, c])?;
    }
    Ok(vec![y])
}
