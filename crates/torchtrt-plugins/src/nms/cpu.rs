//! The CPU kernel: per batch and class, the candidates sorted by falling score (ties by
//! rising index), each kept unless a box kept before it suppresses it.

use torchtrt_plugin_api::{CpuLaunch, DType, PluginResult, bf16, f16};

use super::rule::{Layout, Rule};
use crate::kernels::Float;
use crate::support::Origin;

/// Runs one CPU launch: checks the tensors, selects, writes the selection and its length.
pub(super) fn enqueue(origin: &Origin, rule: &Rule, cpu: CpuLaunch<'_, '_>) -> PluginResult<()> {
    let ([boxes, scores, ..], [selected, count]) = (cpu.inputs, &mut *cpu.outputs) else {
        return Err(origin.input_error(format!(
            "expects boxes, scores and 2 outputs, got {} inputs and {} outputs",
            cpu.inputs.len(),
            cpu.outputs.len()
        )));
    };
    let (b, c, n) = rule
        .problem(&boxes.desc.shape, &scores.desc.shape)
        .map_err(|e| origin.input_error(e))?;
    let width = match rule.layout {
        Layout::Onnx => 3,
        Layout::Torchvision => 1,
    };
    let upper = b * c * rule.kept_per_class(n);
    if selected.desc.dtype != DType::I64 || selected.data.len() < upper * width * 8 {
        return Err(origin.input_error(format!(
            "selection {} holds fewer than {upper} entries",
            selected.desc
        )));
    }
    if count.desc.dtype != DType::I64 || count.data.len() != 8 {
        return Err(origin.input_error(format!("count {} is not a scalar i64", count.desc)));
    }
    let picks = match boxes.desc.dtype {
        DType::F32 => select::<f32>(rule, boxes.data, scores.data, (b, c, n)),
        DType::F16 => select::<f16>(rule, boxes.data, scores.data, (b, c, n)),
        DType::BF16 => select::<bf16>(rule, boxes.data, scores.data, (b, c, n)),
        other => return Err(origin.input_error(format!("no kernel for {other}"))),
    }
    .map_err(|e| origin.input_error(e))?;
    let out: &mut [i64] =
        bytemuck::try_cast_slice_mut(selected.data).map_err(|e| origin.input_error(e))?;
    for (k, &(batch, class, index)) in picks.iter().enumerate() {
        match rule.layout {
            Layout::Onnx => out[3 * k..3 * k + 3].copy_from_slice(&[batch, class, index]),
            Layout::Torchvision => out[k] = index,
        }
    }
    count
        .data
        .copy_from_slice(&(picks.len() as i64).to_le_bytes());
    Ok(())
}

/// The selected `(batch, class, box)` triples in output order.
fn select<T: Float>(
    rule: &Rule,
    boxes: &[u8],
    scores: &[u8],
    (b, c, n): (usize, usize, usize),
) -> Result<Vec<(i64, i64, i64)>, String> {
    let boxes: &[T] = bytemuck::try_cast_slice(boxes).map_err(|e| e.to_string())?;
    let scores: &[T] = bytemuck::try_cast_slice(scores).map_err(|e| e.to_string())?;
    if boxes.len() != b * n * 4 || scores.len() != b * c * n {
        return Err(format!(
            "{} box and {} score elements for {b} batches, {c} classes, {n} boxes",
            boxes.len(),
            scores.len()
        ));
    }
    let keep = rule.kept_per_class(n);
    let mut picks = Vec::new();
    let mut order: Vec<(f32, usize)> = Vec::with_capacity(n);
    let mut kept: Vec<[f32; 4]> = Vec::with_capacity(keep);
    for batch in 0..b {
        let corners: Vec<[f32; 4]> = boxes[batch * n * 4..(batch + 1) * n * 4]
            .chunks_exact(4)
            .map(|q| rule.corners([q[0].to_f32(), q[1].to_f32(), q[2].to_f32(), q[3].to_f32()]))
            .collect();
        for class in 0..c {
            let row = &scores[(batch * c + class) * n..(batch * c + class + 1) * n];
            order.clear();
            order.extend(
                row.iter()
                    .map(|s| s.to_f32())
                    .enumerate()
                    .filter(|&(_, s)| rule.score.is_none_or(|t| s > t))
                    .map(|(i, s)| (s, i)),
            );
            order.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
            kept.clear();
            for &(_, i) in &order {
                if kept.len() == keep {
                    break;
                }
                if kept.iter().all(|&k| !rule.suppresses(k, corners[i])) {
                    kept.push(corners[i]);
                    picks.push((batch as i64, class as i64, i as i64));
                }
            }
        }
    }
    Ok(picks)
}
