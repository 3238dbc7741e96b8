//! `RMSNormalization` (opset 23): one layer over the trailing axes from `axis`.

use torchtrt_core::layers::RmsNormalization;

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("RMSNormalization", |ctx, node| {
        let x = ctx.input(node, 0)?;
        let scale = ctx.input(node, 1)?;
        let rank = ctx.rank(x) as i64;
        let axis = node.int_or("axis", -1)?;
        let first = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&first) {
            return Err(node.err(format!(
                "axis {axis} is out of range for an input of rank {rank}"
            )));
        }
        let layer = RmsNormalization {
            axes: (first..rank).collect(),
            epsilon: node.float_or("epsilon", 1e-5)?,
        };
        Ok(vec![ctx.add(node, layer, &[x, scale])?])
    });
}
