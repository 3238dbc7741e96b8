//! Shape arithmetic followed at build time: the values of the small integer tensors that
//! exporters compute from `Shape` (with `Slice` and `Concat`) to feed `Reshape` and `Expand`
//! under dynamic dims, as dims of the tensors they were read from, so that passes can tell
//! what such a layer does.

use torchtrt_plugin_api::{DType, DimExpr};

use super::Work;
use crate::layers::LayerKind;
use crate::network::{Layer, TensorId};

/// Layers followed back from a shape value: more is not shape arithmetic worth following.
pub(super) const MOST_STEPS: usize = 8;

/// The layer producing `t`.
pub(super) fn producer(work: &Work, t: TensorId) -> Option<&Layer> {
    work.layers.iter().rev().find(|l| l.outputs.contains(&t))
}

/// The values of the 1-D integer tensor `t` as dims, when the layers computing it are
/// constants, `Shape`, one-axis `Slice` and `Concat`.
pub(super) fn dims_of(work: &Work, t: TensorId, steps: usize) -> Option<Vec<DimExpr>> {
    let info = &work.tensors[t.index()];
    if let Some(v) = &info.value {
        let int = matches!(v.dtype(), DType::I64 | DType::I32);
        return (int && v.rank() <= 1).then(|| {
            let values = v.to_f64_vec();
            values.iter().map(|&d| DimExpr::Const(d as i64)).collect()
        });
    }
    if steps == 0 || work.ty(t).shape.len() != 1 {
        return None;
    }
    let layer = producer(work, t)?;
    match &layer.kind {
        LayerKind::Shape(s) => {
            let shape = &work.ty(*layer.inputs.first()?).shape;
            Some(shape[s.dims(shape.len())].to_vec())
        }
        LayerKind::Concat(c) if matches!(c.axis, 0 | -1) => {
            let mut all = Vec::new();
            for &input in &layer.inputs {
                all.extend(dims_of(work, input, steps - 1)?);
            }
            Some(all)
        }
        LayerKind::Slice(s) => {
            let values = dims_of(work, *layer.inputs.first()?, steps - 1)?;
            let params = layer.inputs[1..]
                .iter()
                .map(|p| work.tensors[p.index()].value.as_deref())
                .collect::<Option<Vec<_>>>()?;
            let slice = s.with_values(&params).ok()?;
            let [(start, step, len)] = slice.resolve(&[values.len()]).ok()?[..] else {
                return None;
            };
            let picked = (0..len as i64).map(|i| usize::try_from(start + i * step).ok());
            picked.map(|i| values.get(i?).cloned()).collect()
        }
        _ => None,
    }
}
