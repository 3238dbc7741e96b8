//! `RotaryEmbedding` (opset 23).

use torchtrt_core::layers::RotaryEmbedding;

use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("RotaryEmbedding", |ctx, node| {
        let mut inputs = vec![
            ctx.input(node, 0)?,
            ctx.input(node, 1)?,
            ctx.input(node, 2)?,
        ];
        inputs.extend(ctx.opt_input(node, 3)?);
        let count = |name: &str| -> crate::error::Result<usize> {
            let v = node.int_or(name, 0)?;
            usize::try_from(v).map_err(|_| node.err(format!("{name} {v} must not be negative")))
        };
        let num_heads = if ctx.rank(inputs[0]) == 3 {
            count("num_heads")?
        } else {
            0
        };
        let layer = RotaryEmbedding {
            interleaved: node.bool_or("interleaved", false)?,
            num_heads,
            rotary_dim: count("rotary_embedding_dim")?,
        };
        Ok(vec![ctx.add(node, layer, &inputs)?])
    });
}
