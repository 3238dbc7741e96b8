//! Activation memory planning: lifetimes, release points, and an arena layout at the
//! optimisation shapes that reuses memory between tensors whose lifetimes do not overlap.

use torchtrt_plugin_api::DimExpr;

use crate::engine::EnginePlan;
use crate::engine::MemoryPlan;
use crate::error::{Error, Result};
use crate::layers::{LayerKind, TypeShape};
use crate::limits::check_tensor;
use crate::network::TensorId;
use crate::tensor::ALIGN;

struct Activation {
    tensor: usize,
    first: usize,
    last: usize,
    size: u64,
}

/// Checks every tensor a layer computes whose shape is known at build time against `limit`
/// bytes; the error names the layer, the tensor and the size. Shapes with dynamic dims are
/// checked at run time, before anything is allocated (a profile's default maximum says
/// nothing about the shapes a run will see).
fn check_limit(plan: &EnginePlan, types: &[TypeShape], limit: u64) -> Result<()> {
    for layer in &plan.layers {
        for t in &layer.outputs {
            let ty = &types[t.index()];
            let Some(dims) = ty
                .shape
                .iter()
                .map(|d: &DimExpr| d.as_const().map(|v| v.max(0) as u64))
                .collect::<Option<Vec<u64>>>()
            else {
                continue;
            };
            check_tensor(ty.dtype, &dims, limit).map_err(|message| Error::Layer {
                layer: layer.name.clone(),
                kind: layer.kind.op().kind(),
                message: format!(
                    "output `{}`: {message}",
                    plan.tensor_names[t.index()].escape_debug()
                ),
            })?;
        }
    }
    Ok(())
}

/// Plans memory for `plan`, whose tensor types are `types`, after checking every computed
/// tensor against `limit` bytes.
pub(crate) fn plan(plan: &EnginePlan, types: &[TypeShape], limit: u64) -> Result<MemoryPlan> {
    check_limit(plan, types, limit)?;
    let n = plan.tensor_names.len();
    let mut first = vec![None; n];
    let mut last = vec![None; n];
    let mut pinned = vec![false; n];
    for i in &plan.inputs {
        pinned[i.tensor.index()] = true;
    }
    for (_, t) in &plan.outputs {
        pinned[t.index()] = true;
    }
    for (li, layer) in plan.layers.iter().enumerate() {
        for t in &layer.inputs {
            last[t.index()] = Some(li);
        }
        let constant = matches!(layer.kind, LayerKind::Constant(_));
        for t in &layer.outputs {
            first[t.index()] = Some(li);
            last[t.index()].get_or_insert(li);
            pinned[t.index()] |= constant;
        }
    }
    let opt = |s: &str| {
        plan.inputs
            .iter()
            .flat_map(|i| &i.dims)
            .find_map(|d| match d {
                crate::network::Dim::Dynamic { name, opt, .. } if name == s => Some(*opt),
                _ => None,
            })
    };
    let mut acts: Vec<Activation> = (0..n)
        .filter(|&t| !pinned[t])
        .filter_map(|t| {
            let (f, l) = (first[t]?, last[t]?);
            let ty = &types[t];
            let numel = ty
                .shape
                .iter()
                .map(|d: &DimExpr| d.eval(&opt).unwrap_or(0).max(0) as u64)
                .fold(1u64, u64::saturating_mul);
            let size = numel
                .saturating_mul(ty.dtype.size() as u64)
                .div_ceil(ALIGN as u64)
                .saturating_mul(ALIGN as u64);
            Some(Activation {
                tensor: t,
                first: f,
                last: l.max(f),
                size,
            })
        })
        .collect();
    let mut out = MemoryPlan {
        release_after: vec![Vec::new(); plan.layers.len()],
        offsets: vec![None; n],
        arena_bytes: 0,
        naive_bytes: acts.iter().fold(0u64, |s, a| s.saturating_add(a.size)),
    };
    for a in &acts {
        out.release_after[a.last].push(TensorId(a.tensor as u32));
    }
    acts.sort_by(|a, b| b.size.cmp(&a.size).then(a.tensor.cmp(&b.tensor)));
    let mut placed: Vec<(u64, u64, usize, usize)> = Vec::new();
    for a in &acts {
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|p| p.2 <= a.last && a.first <= p.3)
            .map(|p| (p.0, p.0.saturating_add(p.1)))
            .collect();
        busy.sort_unstable();
        let mut offset = 0u64;
        for (start, end) in busy {
            if start >= offset.saturating_add(a.size) {
                break;
            }
            offset = offset.max(end);
        }
        placed.push((offset, a.size, a.first, a.last));
        out.offsets[a.tensor] = Some(offset);
        out.arena_bytes = out.arena_bytes.max(offset.saturating_add(a.size));
    }
    Ok(out)
}
