//! Indexing: `Gather`, `GatherElements`, `ScatterElements`, `GatherND`, `ScatterND`.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{
    Gather, GatherElements, GatherNd, ScatterElements, ScatterNd, ScatterReduction,
};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Gather", |ctx, node| {
        let (data, idx) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
        let axis = node.int_or("axis", 0)?;
        Ok(vec![ctx.add(node, Gather { axis }, &[data, idx])?])
    });
    r.add("GatherElements", |ctx, node| {
        let (data, idx) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
        let axis = node.int_or("axis", 0)?;
        Ok(vec![ctx.add(
            node,
            GatherElements { axis },
            &[data, idx],
        )?])
    });
    r.add("ScatterElements", scatter_elements);
    r.add("GatherND", |ctx, node| {
        let (data, idx) = (ctx.input(node, 0)?, ctx.input(node, 1)?);
        let batch_dims = node.int_or("batch_dims", 0)?;
        let batch_dims = usize::try_from(batch_dims)
            .map_err(|_| node.err(format!("batch_dims {batch_dims} must not be negative")))?;
        Ok(vec![ctx.add(
            node,
            GatherNd { batch_dims },
            &[data, idx],
        )?])
    });
    r.add("ScatterND", |ctx, node| {
        let inputs = [
            ctx.input(node, 0)?,
            ctx.input(node, 1)?,
            ctx.input(node, 2)?,
        ];
        let reduction = reduction(node)?;
        Ok(vec![ctx.add(node, ScatterNd { reduction }, &inputs)?])
    });
}

/// The `reduction` attribute of the scatters (`add`/`mul` from opset 16, `max`/`min` from
/// 18).
fn reduction(node: &Node<'_>) -> Result<ScatterReduction> {
    Ok(match node.string_or("reduction", "none")?.as_str() {
        "none" => ScatterReduction::None,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        "max" => ScatterReduction::Max,
        "min" => ScatterReduction::Min,
        other => {
            return Err(node.err(format!(
                "attribute `reduction`: unknown reduction `{other}`"
            )));
        }
    })
}

/// `ScatterElements` with its `reduction` (`add`/`mul` from opset 16, `max`/`min` from 18).
fn scatter_elements(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let inputs = [
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    ];
    let layer = ScatterElements {
        axis: node.int_or("axis", 0)?,
        reduction: reduction(node)?,
    };
    Ok(vec![ctx.add(node, layer, &inputs)?])
}
