//! `Transpose`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::Transpose;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Transpose", transpose);
}

/// `Transpose` by `perm`, which defaults to reversing the dims.
fn transpose(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let x = ctx.input(node, 0)?;
    let rank = ctx.rank(x);
    let perm = match node.ints("perm")? {
        None => (0..rank).rev().collect(),
        Some(p) => p
            .iter()
            .map(|&a| usize::try_from(a).ok().filter(|&a| a < rank))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                node.err(format!(
                    "attribute `perm` {p:?} is not a permutation of rank {rank}"
                ))
            })?,
    };
    Ok(vec![ctx.add(node, Transpose { perm }, &[x])?])
}
