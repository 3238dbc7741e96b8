//! Residuals the layout pass brings next to their linear layer: where a block's `Add` read
//! a product through a `Transpose` that the layout pass took away (ConvNeXt's
//! `x + γ·mlp(x)`, the MLP running channels last), the `Add` now reads the product itself,
//! and it fuses into the product as [`fuse_matmul_residual`](super::fuse::fuse_matmul_residual)
//! fuses the `Add`s it sees as they are added: the product takes the `Add`'s place and
//! output, with the residual as its fourth input (after a zero bias where it has none). The
//! product's old layer is left unread, for `compact` to drop.

use super::Work;
use super::fuse::{add_sides, fuses_matmul_residual, is_linear};
use super::uses::Uses;
use crate::network::TensorId;
use crate::tensor::Tensor;

/// Fuses every residual `Add` of `work` whose other operand is a linear layer's product
/// that nothing else reads. Runs from the last layer back, so that a zero bias inserted
/// before an `Add` moves no layer still to be looked at.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)]) {
    let uses = Uses::new(work, outputs);
    for q in (0..work.layers.len()).rev() {
        let Some((p, r, n)) = residual_product(work, &uses, q) else {
            continue;
        };
        let y = work.layers[q].outputs[0];
        let mut mm = work.layers[p].clone();
        let mut at = q;
        if mm.inputs.len() == 2 {
            let zeros = Tensor::zeros(work.ty(y).dtype, &[n]);
            let name = format!("{}/bias", mm.name);
            mm.inputs.push(work.insert_constant(q, name, zeros));
            at += 1;
        }
        mm.inputs.push(r);
        mm.outputs = vec![y];
        work.layers[at] = mm;
    }
}

/// For the `Add` at `q`: the position of the linear layer whose product it adds to a
/// residual `r` of the same type, that residual, and the product's column count.
fn residual_product(work: &Work, uses: &Uses, q: usize) -> Option<(usize, TensorId, usize)> {
    let add = &work.layers[q];
    let ty = work.ty(*add.outputs.first()?);
    let n = usize::try_from(ty.shape.last()?.as_const()?).ok()?;
    add_sides(&add.kind, &add.inputs)
        .into_iter()
        .find_map(|(m, r)| {
            let p = uses.sole(work, m)?;
            let fits = is_linear(work, p, ty.dtype, fuses_matmul_residual)
                && work.devices[q] == work.devices[p]
                && (2..=3).contains(&work.layers[p].inputs.len())
                && work.ty(m) == ty
                && work.ty(r) == ty;
            fits.then_some((p, r, n))
        })
}
