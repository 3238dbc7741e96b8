//! Shape arithmetic followed while a network is built: the values of the small integer
//! tensors that exporters compute from `Shape` (with `Slice`, `Gather`, `Concat`,
//! `Squeeze`, `Unsqueeze` and `Cast`) to feed `Reshape`, `Expand` and `Range` under dynamic
//! dims, as dims of the tensors they were read from. The importers and the builder's passes
//! then see those layers' outputs with the network's dims (`batch`, `seq`, or a constant)
//! where inference leaves dims known only at run time, and can use and compare them: a
//! GPT-2 projection reshaped to `[batch, seq, 192]` splits into three known parts; a ViT's
//! attention scores and its mask are both `[batch, heads, 197, 197]`; a BERT mask gathered
//! by `Range(0, seq, 1)` indices has `seq` keys. The engine's own inference keeps its rules;
//! at run time every shape is concrete.

use torchtrt_plugin_api::{DType, DimExpr};

use crate::layers::{LayerKind, TypeShape};
use crate::network::TensorId;
use crate::tensor::Tensor;

/// Layers followed back from a shape value: more is not shape arithmetic worth following.
pub const MOST_STEPS: usize = 8;

/// Values of a shape: more is not a shape.
const MOST_VALUES: usize = 64;

/// A network being built, as shape arithmetic reads it.
pub trait ShapeGraph {
    /// The type of a tensor already inferred.
    fn ty(&self, t: TensorId) -> &TypeShape;
    /// The value of a tensor known while building (constants and what folds from them).
    fn value(&self, t: TensorId) -> Option<&Tensor>;
    /// The kind and inputs of the layer producing `t`; `None` for network inputs.
    fn producer(&self, t: TensorId) -> Option<(&LayerKind, &[TensorId])>;
}

/// The values of the integer tensor `t` of rank 0 or 1 as dims, when the layers computing it
/// are constants, `Shape`, one-axis `Slice`, `Gather` of constant indices, `Concat`, and
/// `Squeeze`, `Unsqueeze`, `Reshape` or integer `Cast` between ranks 0 and 1 (which keep the
/// values).
pub fn dims_of(work: &impl ShapeGraph, t: TensorId, steps: usize) -> Option<Vec<DimExpr>> {
    if let Some(v) = work.value(t) {
        let int = matches!(v.dtype(), DType::I64 | DType::I32);
        return (int && v.rank() <= 1 && v.numel() <= MOST_VALUES).then(|| {
            let values = v.to_f64_vec();
            values.iter().map(|&d| DimExpr::Const(d as i64)).collect()
        });
    }
    if steps == 0 || work.ty(t).shape.len() > 1 {
        return None;
    }
    let (kind, inputs) = work.producer(t)?;
    match kind {
        LayerKind::Shape(s) => {
            let shape = &work.ty(*inputs.first()?).shape;
            Some(shape[s.dims(shape.len())].to_vec())
        }
        LayerKind::Concat(c) if matches!(c.axis, 0 | -1) => {
            let mut all = Vec::new();
            for &input in inputs {
                all.extend(dims_of(work, input, steps - 1)?);
            }
            Some(all)
        }
        LayerKind::Slice(s) => {
            let values = dims_of(work, *inputs.first()?, steps - 1)?;
            let params = inputs[1..]
                .iter()
                .map(|&p| work.value(p))
                .collect::<Option<Vec<_>>>()?;
            let slice = s.with_values(&params).ok()?;
            let [(start, step, len)] = slice.resolve(&[values.len()]).ok()?[..] else {
                return None;
            };
            let picked = (0..len as i64).map(|i| usize::try_from(start + i * step).ok());
            picked.map(|i| values.get(i?).cloned()).collect()
        }
        LayerKind::Gather(g) if matches!(g.axis, 0 | -1) => {
            let values = dims_of(work, *inputs.first()?, steps - 1)?;
            let indices = work.value(*inputs.get(1)?)?;
            let n = values.len() as i64;
            let picked = indices.to_i64_vec()?.into_iter().map(|i| {
                let i = if i < 0 { i + n } else { i };
                values.get(usize::try_from(i).ok()?).cloned()
            });
            picked.collect()
        }
        LayerKind::Cast(c) if !matches!(c.to, DType::I64 | DType::I32) => None,
        LayerKind::Squeeze(_)
        | LayerKind::Unsqueeze(_)
        | LayerKind::Reshape(_)
        | LayerKind::Cast(_) => {
            let input = *inputs.first()?;
            if work.ty(input).shape.len() > 1 {
                return None;
            }
            dims_of(work, input, steps - 1)
        }
        _ => None,
    }
}

/// The length of `Range(start, limit, delta)` over integers, when `start ≤ 0` and
/// `delta > 0` are constants and `limit` a dim: `⌈(limit − start) / delta⌉`, never negative
/// (`arange(n)` is `n` long).
fn range_len(work: &impl ShapeGraph, inputs: &[TensorId]) -> Option<DimExpr> {
    let [start, limit, delta] = inputs else {
        return None;
    };
    let constant = |&t: &TensorId| {
        let v = work.value(t)?.to_i64_vec()?;
        (v.len() == 1).then(|| v[0])
    };
    let (start, delta) = (constant(start)?, constant(delta)?);
    let [limit] = &dims_of(work, *limit, MOST_STEPS)?[..] else {
        return None;
    };
    (start <= 0 && delta > 0).then(|| (limit.clone() - start).ceil_div(delta))
}

/// The dims of a `Slice` of `inputs` (data, starts, ends, optional axes and steps) whose
/// ends follow from shape arithmetic: with constant starts `s ≥ 0`, axes and unit steps,
/// an axis of `d` elements sliced to an end `e ≥ 0` keeps `min(e, d) − s` of them (never
/// fewer than 0), as `position_ids[:, :seq]` keeps `min(seq, 512)`.
fn sliced(work: &impl ShapeGraph, inputs: &[TensorId]) -> Option<Vec<DimExpr>> {
    let [x, starts, ends, rest @ ..] = inputs else {
        return None;
    };
    let constants = |t: &TensorId| work.value(*t)?.to_i64_vec();
    let starts = constants(starts)?;
    let ends = dims_of(work, *ends, MOST_STEPS)?;
    let mut out = work.ty(*x).shape.clone();
    let axes = match rest.first() {
        Some(a) => constants(a)?,
        None => (0..starts.len() as i64).collect(),
    };
    if rest
        .get(1)
        .is_some_and(|t| constants(t).is_none_or(|v| v.iter().any(|&s| s != 1)))
        || starts.len() != ends.len()
        || axes.len() != ends.len()
    {
        return None;
    }
    for ((&axis, &start), end) in axes.iter().zip(&starts).zip(ends) {
        let axis = crate::layers::normalize_axis(axis, out.len()).ok()?;
        if start < 0 || end.as_const().is_some_and(|e| e < 0) {
            return None;
        }
        let kept = end.min(out[axis].clone()) - start;
        out[axis] = if start > 0 { kept.max(0) } else { kept };
    }
    Some(out)
}

/// Gives the output `outs` of the `Reshape`, `Expand`, `Range` or `Slice` layer `name` of
/// `inputs` the dims its shape (limit, or end) input's values give, where inference left
/// them to run time (`name#0.axis`).
pub fn sharpen(
    work: &impl ShapeGraph,
    name: &str,
    kind: &LayerKind,
    inputs: &[TensorId],
    outs: &mut [TypeShape],
) {
    let [out] = outs else {
        return;
    };
    let target = || match inputs {
        [x, shape, ..] => Some((&work.ty(*x).shape, dims_of(work, *shape, MOST_STEPS)?)),
        _ => None,
    };
    let known = match kind {
        LayerKind::Expand(_) => target().and_then(|(x, dims)| expanded(x, &dims)),
        LayerKind::Reshape(r) => target().and_then(|(x, dims)| reshaped(x, &dims, r.allow_zero)),
        LayerKind::Range(_) if out.dtype.is_integer() => range_len(work, inputs).map(|n| vec![n]),
        LayerKind::Slice(_) => sliced(work, inputs),
        _ => return,
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

/// `x` broadcast to `dims` (ONNX `Expand`), by the rule inference broadcasts with: equal
/// or 1 dims broadcast, two different dims not both known become their maximum.
fn expanded(x: &[DimExpr], dims: &[DimExpr]) -> Option<Vec<DimExpr>> {
    crate::layers::broadcast_shapes(x, dims).ok()
}

/// `x` reshaped to `dims` (ONNX `Reshape`: a 0 copies the input's dim unless `allow_zero`,
/// one −1 takes what the others leave: the input's dims over the others', the dims both
/// have cancelled, so `[b, s, 64]` to `[b, s, −1, 16]` gives 4 heads).
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
            let mut numel = x.to_vec();
            let mut rest = Vec::new();
            for d in out
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, d)| d)
            {
                match numel.iter().position(|n| n == d) {
                    Some(p) => drop(numel.swap_remove(p)),
                    None => rest.push(d.clone()),
                }
            }
            let product = |v: Vec<DimExpr>| v.into_iter().fold(DimExpr::Const(1), |a, d| a * d);
            out[i] = product(numel).floor_div(product(rest));
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{Shape, Slice};

    /// A tensor's type, its value if known, and the layer producing it if any.
    type Node = (
        TypeShape,
        Option<Tensor>,
        Option<(LayerKind, Vec<TensorId>)>,
    );

    /// Tensors with a type, maybe a value, and maybe the layer producing them.
    #[derive(Default)]
    struct Graph(Vec<Node>);

    impl Graph {
        fn add(&mut self, ty: TypeShape, value: Option<Tensor>) -> TensorId {
            self.0.push((ty, value, None));
            TensorId(self.0.len() as u32 - 1)
        }

        fn constant(&mut self, v: &[i64]) -> TensorId {
            let ty = TypeShape::new(DType::I64, vec![(v.len() as i64).into()]);
            self.add(ty, Some(Tensor::from_vec(&[v.len()], v.to_vec()).unwrap()))
        }

        fn layer(&mut self, kind: LayerKind, inputs: &[TensorId], ty: TypeShape) -> TensorId {
            let t = self.add(ty, None);
            self.0[t.index()].2 = Some((kind, inputs.to_vec()));
            t
        }
    }

    impl ShapeGraph for Graph {
        fn ty(&self, t: TensorId) -> &TypeShape {
            &self.0[t.index()].0
        }
        fn value(&self, t: TensorId) -> Option<&Tensor> {
            self.0[t.index()].1.as_ref()
        }
        fn producer(&self, t: TensorId) -> Option<(&LayerKind, &[TensorId])> {
            self.0[t.index()].2.as_ref().map(|(k, i)| (k, &i[..]))
        }
    }

    #[test]
    fn a_slice_to_a_dim_keeps_at_most_the_axis() {
        let mut g = Graph::default();
        let table = g.add(TypeShape::new(DType::F32, dims(&["1", "512"])), None);
        let ids = g.add(TypeShape::new(DType::I64, dims(&["b", "seq"])), None);
        let seq = g.layer(
            LayerKind::Shape(Shape {
                start: 1,
                end: Some(2),
            }),
            &[ids],
            TypeShape::new(DType::I64, dims(&["1"])),
        );
        let axes = g.constant(&[1]);
        for (start, want) in [
            (0, DimExpr::sym("seq").min(512)),
            (2, (DimExpr::sym("seq").min(512) - 2).max(0)),
        ] {
            let starts = g.constant(&[start]);
            assert_eq!(
                sliced(&g, &[table, starts, seq, axes]),
                Some(vec![1.into(), want])
            );
        }
        let zero = g.constant(&[0]);
        let steps = g.constant(&[2]);
        assert_eq!(sliced(&g, &[table, zero, seq, axes, steps]), None);
        let mut outs = [TypeShape::new(DType::F32, dims(&["1", "s#0.1"]))];
        let kind = LayerKind::Slice(Slice::default());
        sharpen(&g, "s", &kind, &[table, zero, seq, axes], &mut outs);
        assert_eq!(outs[0].shape, vec![1.into(), DimExpr::sym("seq").min(512)]);
    }

    fn dims(v: &[&str]) -> Vec<DimExpr> {
        v.iter()
            .map(|d| match d.parse::<i64>() {
                Ok(c) => DimExpr::Const(c),
                Err(_) => DimExpr::sym(d),
            })
            .collect()
    }

    #[test]
    fn expand_broadcasts_as_inference_does() {
        let got = expanded(
            &dims(&["1", "1", "17", "1"]),
            &dims(&["b", "1", "17", "17"]),
        );
        assert_eq!(got, Some(dims(&["b", "1", "17", "17"])));
        assert_eq!(
            expanded(&dims(&["64"]), &dims(&["b", "1", "1"])),
            Some(dims(&["b", "1", "64"]))
        );
        assert_eq!(
            expanded(&dims(&["3", "n"]), &dims(&["3", "m"])),
            Some(vec![3.into(), DimExpr::sym("n").max(DimExpr::sym("m"))])
        );
        assert_eq!(expanded(&dims(&["3"]), &dims(&["4"])), None);
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

    #[test]
    fn an_inferred_dim_cancels_the_dims_both_sides_have() {
        let x = dims(&["b", "s", "64"]);
        assert_eq!(
            reshaped(&x, &dims(&["b", "s", "-1", "16"]), true),
            Some(dims(&["b", "s", "4", "16"]))
        );
        let wider = dims(&["b", "t", "64"]);
        let got = reshaped(&wider, &dims(&["b", "s", "-1", "16"]), true).unwrap();
        assert_eq!(
            got[2],
            (DimExpr::sym("t") * 64).floor_div(DimExpr::sym("s") * 16)
        );
    }
}
