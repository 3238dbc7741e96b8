//! Structural checks of a decoded plan, run by every reader of an engine file (`run`,
//! `inspect`, the C APIs): every index, count and offset is in range before anything is
//! indexed by it, so a file with a valid checksum but bad tables is an error, never a panic.

use std::ops::Range;

use super::EnginePlan;
use crate::error::{Error, Result};
use crate::layers::LayerKind;
use crate::network::TensorId;

/// Where a weight's bytes lie in the file.
pub(crate) struct WeightSpan {
    /// Offset from the start of the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

fn bad(field: &str, message: String) -> Error {
    Error::Engine(format!("invalid plan: {field}: {message}"))
}

/// Checks a tensor id against the tensor table.
fn tensor(n: usize, field: &str, t: TensorId) -> Result<()> {
    if t.index() < n {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("tensor #{} does not exist (the plan has {n} tensors)", t.0),
        ))
    }
}

/// Checks the plan's tables against each other: tensor ids, per-layer tables, the memory
/// plan and constant slots.
pub(crate) fn check_plan(plan: &EnginePlan, weights: usize) -> Result<()> {
    let n = plan.tensor_names.len();
    if plan.tensor_dtypes.len() != n {
        return Err(bad(
            "tensor_dtypes",
            format!("{} entries for {n} tensors", plan.tensor_dtypes.len()),
        ));
    }
    let layers = plan.layers.len();
    if plan.devices.len() != layers {
        return Err(bad(
            "devices",
            format!("{} entries for {layers} layers", plan.devices.len()),
        ));
    }
    for (k, input) in plan.inputs.iter().enumerate() {
        tensor(n, &format!("inputs[{k}]"), input.tensor)?;
    }
    for (k, (_, t)) in plan.outputs.iter().enumerate() {
        tensor(n, &format!("outputs[{k}]"), *t)?;
    }
    for (li, layer) in plan.layers.iter().enumerate() {
        for (k, &t) in layer.inputs.iter().enumerate() {
            tensor(n, &format!("layers[{li}].inputs[{k}]"), t)?;
        }
        for (k, &t) in layer.outputs.iter().enumerate() {
            tensor(n, &format!("layers[{li}].outputs[{k}]"), t)?;
        }
        if let LayerKind::Constant(c) = &layer.kind
            && c.slot as usize >= weights
        {
            return Err(bad(
                &format!("layers[{li}].slot"),
                format!("weight {} does not exist ({weights} weights)", c.slot),
            ));
        }
    }
    let memory = &plan.memory;
    if memory.release_after.len() != layers {
        return Err(bad(
            "memory.release_after",
            format!("{} lists for {layers} layers", memory.release_after.len()),
        ));
    }
    let mut defined_by: Vec<Option<usize>> = vec![None; n];
    for (li, layer) in plan.layers.iter().enumerate() {
        for t in &layer.outputs {
            defined_by[t.index()].get_or_insert(li);
        }
    }
    for (_, t) in &plan.outputs {
        defined_by[t.index()] = None;
    }
    for (li, list) in memory.release_after.iter().enumerate() {
        for (k, &t) in list.iter().enumerate() {
            let field = format!("memory.release_after[{li}][{k}]");
            tensor(n, &field, t)?;
            if defined_by[t.index()].is_none_or(|d| d > li) {
                return Err(bad(
                    &field,
                    format!(
                        "tensor #{} is not an activation computed by layer {li} or before",
                        t.0
                    ),
                ));
            }
        }
    }
    if memory.offsets.len() != n {
        return Err(bad(
            "memory.offsets",
            format!("{} entries for {n} tensors", memory.offsets.len()),
        ));
    }
    for (t, off) in memory.offsets.iter().enumerate() {
        if let Some(off) = off
            && *off > memory.arena_bytes
        {
            return Err(bad(
                &format!("memory.offsets[{t}]"),
                format!(
                    "offset {off} lies outside the {}-byte arena",
                    memory.arena_bytes
                ),
            ));
        }
    }
    Ok(())
}

/// Checks that weights lie in `allowed` (the file after the plan), aligned to `align`,
/// and do not overlap each other.
pub(crate) fn check_weights(spans: &[WeightSpan], allowed: Range<u64>, align: u64) -> Result<()> {
    let mut order: Vec<(u64, u64, usize)> = Vec::with_capacity(spans.len());
    for (i, s) in spans.iter().enumerate() {
        let field = format!("weights[{i}]");
        if !s.offset.is_multiple_of(align) {
            return Err(bad(
                &field,
                format!("offset {} is not {align}-byte aligned", s.offset),
            ));
        }
        let end = s.offset.checked_add(s.len);
        if s.offset < allowed.start || end.is_none_or(|e| e > allowed.end) {
            return Err(bad(
                &field,
                format!(
                    "bytes {}..+{} lie outside the weight area {}..{}",
                    s.offset, s.len, allowed.start, allowed.end
                ),
            ));
        }
        order.push((s.offset, s.offset + s.len, i));
    }
    order.sort_unstable();
    for w in order.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(bad(
                &format!("weights[{}]", w[1].2),
                format!("overlaps weights[{}]", w[0].2),
            ));
        }
    }
    Ok(())
}
