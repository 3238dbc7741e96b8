//! Linear layers' tails that the layout pass brings next to them. Where a block's layer
//! scale and residual `Add` read a product through a `Transpose` that the layout pass took
//! away (ConvNeXt's `x + γ·mlp(x)`, with `γ [1, C, 1, 1]` applied after the transpose back
//! and the MLP running channels last), they now read the product itself: the scale folds
//! into the product's weights and bias as [`fold_scale_into_matmul`] folds the scales it
//! sees as they are added, then the `Add` fuses into the product as
//! [`fuse_matmul_residual`] fuses those. Each time the product takes the place and output
//! of the layer it absorbs (after any constants it now reads); its old layer is left
//! unread, for `compact` to drop.
//!
//! [`fold_scale_into_matmul`]: super::fuse_matmul_scale::fold_scale_into_matmul
//! [`fuse_matmul_residual`]: super::fuse::fuse_matmul_residual

use super::Work;
use super::fuse::{add_sides, fuses_matmul_residual, is_linear, take_residual};
use super::fuse_matmul_scale::scaled_product;
use super::uses::Uses;
use crate::network::{Layer, TensorId};

/// Folds the scales (where `fold_constants`), then fuses the residuals, of every linear
/// layer of `work` whose product only that scale or `Add` reads. Each sweep runs from the
/// last layer back, so that constants inserted before a layer move none still to be
/// looked at.
pub(super) fn run(work: &mut Work, outputs: &[(String, TensorId)], fold_constants: bool) {
    let uses = Uses::live(work, outputs);
    for q in (0..work.layers.len()).rev().filter(|_| fold_constants) {
        let layer = &work.layers[q];
        let Some(&y) = layer.outputs.first() else {
            continue;
        };
        let producer = |t: TensorId| {
            uses.sole(work, t)
                .filter(|&p| work.devices[p] == work.devices[q])
        };
        let Ok(Some(scaled)) =
            scaled_product(work, &layer.kind, &layer.inputs, work.ty(y), producer)
        else {
            continue;
        };
        let mut mm = work.layers[scaled.pos].clone();
        let mut at = q;
        scaled.apply(&mut mm, |name, v| {
            at += 1;
            work.insert_constant(at - 1, name, v)
        });
        replace(work, at, mm);
    }
    let uses = Uses::live(work, outputs);
    for q in (0..work.layers.len()).rev() {
        let Some((p, r, n)) = residual_product(work, &uses, q) else {
            continue;
        };
        let mut mm = work.layers[p].clone();
        let mut at = q;
        let dtype = work.ty(r).dtype;
        take_residual(&mut mm, r, dtype, n, |name, v| {
            at += 1;
            work.insert_constant(q, name, v)
        });
        replace(work, at, mm);
    }
}

/// Puts the product `mm` in the place of the layer at `at`, writing that layer's output.
fn replace(work: &mut Work, at: usize, mut mm: Layer) {
    mm.outputs = work.layers[at].outputs.clone();
    work.layers[at] = mm;
}

/// For the `Add` at `q`: the position of the linear layer on the same device whose product
/// (nothing else reads) it adds to a residual `r` of the same type, that residual, and the
/// product's column count.
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
