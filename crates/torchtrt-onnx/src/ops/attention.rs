//! `Attention` (opset 23): one fused attention layer; the present keys and values, when
//! asked for, are the past ones concatenated with the new ones (in `[batch, heads, seq,
//! head]`); the score matrix (`qk_matmul_output`) is the layer's second output.

use torchtrt_core::TensorId;
use torchtrt_core::layers::{Attention, Concat, Reshape, ScoreStage, Transpose};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::ConverterRegistry;

pub(crate) fn register(r: &mut ConverterRegistry) {
    r.add("Attention", attention);
}

fn attention(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
    let (q, k, v) = (
        ctx.input(node, 0)?,
        ctx.input(node, 1)?,
        ctx.input(node, 2)?,
    );
    let mask = ctx.opt_input(node, 3)?;
    let past = match (ctx.opt_input(node, 4)?, ctx.opt_input(node, 5)?) {
        (Some(pk), Some(pv)) => Some((pk, pv)),
        (None, None) => None,
        _ => return Err(node.err("past_key and past_value must be given together")),
    };
    let nonpad = ctx.opt_input(node, 6)?;
    let wanted = |i: usize| node.proto.output.get(i).is_some_and(|o| !o.is_empty());
    let scores =
        if wanted(3) {
            let mode = node.int_or("qk_matmul_output_mode", 0)?;
            Some(ScoreStage::from_onnx(mode).ok_or_else(|| {
                node.err(format!("qk_matmul_output_mode {mode} is not 0, 1, 2 or 3"))
            })?)
        } else {
            None
        };
    let rank = ctx.rank(q);
    let heads = |name: &str| -> Result<usize> {
        let n = node.int_or(name, 0)?;
        match usize::try_from(n) {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(node.err(format!("rank-3 inputs need a positive `{name}`, got {n}"))),
        }
    };
    let (q_heads, kv_heads) = if rank == 3 {
        (heads("q_num_heads")?, heads("kv_num_heads")?)
    } else {
        (0, 0)
    };
    let layer = Attention {
        q_heads,
        kv_heads,
        scale: node.float("scale")?,
        causal: node.bool_or("is_causal", false)?,
        softcap: node.float_or("softcap", 0.0)?,
        mask: mask.is_some(),
        past: past.is_some(),
        nonpad: nonpad.is_some(),
        left_window: node.int_or("left_window_size", -1)?,
        right_window: node.int_or("right_window_size", -1)?,
        scores,
    };
    let mut inputs = vec![q, k, v];
    inputs.extend(mask);
    if let Some((pk, pv)) = past {
        inputs.extend([pk, pv]);
    }
    inputs.extend(nonpad);
    let ys = ctx.add_multi(node, layer, &inputs)?;
    let mut outputs = vec![ys[0]];
    for (i, new) in [(1, k), (2, v)] {
        if !wanted(i) && !wanted(2) && !wanted(3) {
            break;
        }
        let heads_first = if rank == 3 {
            let split = ctx.add(node, Reshape::new(vec![0, 0, kv_heads as i64, -1]), &[new])?;
            ctx.add(
                node,
                Transpose {
                    perm: vec![0, 2, 1, 3],
                },
                &[split],
            )?
        } else {
            new
        };
        let present = match past {
            Some((pk, pv)) => {
                let old = if i == 1 { pk } else { pv };
                ctx.add(node, Concat { axis: 2 }, &[old, heads_first])?
            }
            None => heads_first,
        };
        outputs.push(present);
    }
    outputs.extend(ys.get(1));
    Ok(outputs)
}
