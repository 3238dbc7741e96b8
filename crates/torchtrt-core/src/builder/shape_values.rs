//! Shape arithmetic followed at build time: the values of the small integer tensors that
//! exporters compute from `Shape` (with `Slice` and `Concat`) to feed `Reshape` and `Expand`
//! under dynamic dims, as dims of the tensors they were read from. The builder's passes then
//! see those layers' outputs with the network's dims (`batch`) where inference leaves dims
//! known only at run time, and can compare them (a ViT's attention scores and its mask, both
//! `[batch, heads, 197, 197]`). The engine's own inference keeps its rules; at run time every
//! shape is concrete.

use torchtrt_plugin_api::{DType, DimExpr};

use super::Work;
use crate::layers::{LayerKind, TypeShape};
use crate::network::{Layer, TensorId};

/// Layers followed back from a shape value: more is not shape arithmetic worth following.
pub(super) const MOST_STEPS: usize = 8;

/// Values of a shape: more is not a shape.
const MOST_VALUES: usize = 64;

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
        return (int && v.rank() <= 1 && v.numel() <= MOST_VALUES).then(|| {
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

/// Gives the output `outs` of the `Reshape` or `Expand` layer `name` of `inputs` the dims
/// its shape input's values are, where inference left them to run time (`name#0.axis`).
pub(super) fn sharpen(
    work: &Work,
    name: &str,
    kind: &LayerKind,
    inputs: &[TensorId],
    outs: &mut [TypeShape],
) {
    let ([x, shape, ..], [out]) = (inputs, outs) else {
        return;
    };
    let allow_zero = match kind {
        LayerKind::Expand(_) => None,
        LayerKind::Reshape(r) => Some(r.allow_zero),
        _ => return,
    };
    let Some(dims) = dims_of(work, *shape, MOST_STEPS) else {
        return;
    };
    let x = &work.ty(*x).shape;
    let known = match allow_zero {
        None => expanded(x, &dims),
        Some(allow_zero) => reshaped(x, &dims, allow_zero),
    };
    let Some(known) = known.filter(|k| k.len() == out.shape.len()) else {
        return;
    };
    for (axis, (d, k)) in out.shape.iter_mut().zip(known).enumerate() {
        if *d == DimExpr::sym(&format!("{name}#0.{axis}")) {
            *d = k;
        }
    }
}

/// `x` broadcast to `dims` (ONNX `Expand`), where each pair of dims is equal or one is 1.
fn expanded(x: &[DimExpr], dims: &[DimExpr]) -> Option<Vec<DimExpr>> {
    let rank = x.len().max(dims.len());
    let one = DimExpr::Const(1);
    let at = |v: &[DimExpr], i: usize| {
        (i + v.len())
            .checked_sub(rank)
            .map_or(one.clone(), |j| v[j].clone())
    };
    (0..rank)
        .map(|i| match (at(x, i), at(dims, i)) {
            (a, b) if a == b || b == one => Some(a),
            (a, b) if a == one => Some(b),
            _ => None,
        })
        .collect()
}

/// `x` reshaped to `dims` (ONNX `Reshape`: a 0 copies the input's dim unless `allow_zero`,
/// one −1 takes what the others leave).
fn reshaped(x: &[DimExpr], dims: &[DimExpr], allow_zero: bool) -> Option<Vec<DimExpr>> {
    let mut out: Vec<DimExpr> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| match d.as_const() {
            Some(0) if !allow_zero => x.get(i).cloned(),
            Some(v) if v < -1 => None,
            _ => Some(d.clone()),
        })
        .collect::<Option<_>>()?;
    let inferred: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].as_const() == Some(-1))
        .collect();
    match inferred[..] {
        [] => Some(out),
        [i] => {
            let numel = x.iter().cloned().fold(DimExpr::Const(1), |a, d| a * d);
            let rest = (0..out.len())
                .filter(|&j| j != i)
                .fold(DimExpr::Const(1), |a, j| a * out[j].clone());
            out[i] = numel.floor_div(rest);
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(v: &[&str]) -> Vec<DimExpr> {
        v.iter()
            .map(|d| match d.parse::<i64>() {
                Ok(c) => DimExpr::Const(c),
                Err(_) => DimExpr::sym(d),
            })
            .collect()
    }

    #[test]
    fn expand_takes_the_larger_of_each_pair_where_one_is_one() {
        let got = expanded(
            &dims(&["1", "1", "17", "1"]),
            &dims(&["b", "1", "17", "17"]),
        );
        assert_eq!(got, Some(dims(&["b", "1", "17", "17"])));
        assert_eq!(
            expanded(&dims(&["64"]), &dims(&["b", "1", "1"])),
            Some(dims(&["b", "1", "64"]))
        );
        assert_eq!(expanded(&dims(&["3", "n"]), &dims(&["3", "m"])), None);
    }

    #[test]
    fn reshape_copies_zeros_and_infers_one_dim() {
        let x = dims(&["b", "4", "17", "16"]);
        assert_eq!(
            reshaped(&x, &dims(&["-1", "17", "16"]), false),
            Some(vec![DimExpr::sym("b") * 4, 17.into(), 16.into()])
        );
        assert_eq!(
            reshaped(&x, &dims(&["0", "0", "272"]), false),
            Some(dims(&["b", "4", "272"]))
        );
        assert_eq!(reshaped(&x, &dims(&["-1", "-1"]), false), None);
        assert_eq!(reshaped(&x, &dims(&["-2", "4"]), false), None);
    }
}
