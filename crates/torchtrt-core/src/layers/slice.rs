//! Strided slices (ONNX `Slice`), with parameters as fields or as inputs.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DimExpr;

use super::value_input::{input_vector, int_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, normalize_axis, unknown_dim};
use crate::tensor::Tensor;

/// Takes `starts[i]..ends[i]` with `steps[i]` along `axes[i]`. Negative starts/ends count
/// from the end; out-of-range values clamp, as in ONNX.
///
/// ONNX-10 style, the parameters may also come as optional inputs 1 to 4 (`starts`, `ends`,
/// `axes`, `steps`: 1-D i32/i64 tensors); a present input replaces its field. Empty `axes`
/// mean `0..n` and empty `steps` all 1, `n` being the number of starts.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Slice {
    /// First index per sliced axis.
    pub starts: Vec<i64>,
    /// One-past-last index per sliced axis (`i64::MAX` for "to the end").
    pub ends: Vec<i64>,
    /// The sliced axes.
    pub axes: Vec<i64>,
    /// Step per sliced axis (non-zero; negative walks backwards).
    pub steps: Vec<i64>,
}

const PARAMS: [&str; 4] = ["starts", "ends", "axes", "steps"];

/// `⌈n / k⌉` for `n ≥ 0`, `k ≥ 1`, without overflow.
fn ceil_div(n: i64, k: i64) -> i64 {
    if n == 0 { 0 } else { (n - 1) / k + 1 }
}

/// The first index and the length of a slice of a dim of size `d`.
pub fn resolve_slice(d: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    if d <= 0 {
        return (0, 0);
    }
    let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    if step > 0 {
        let s = wrap(start).clamp(0, d);
        let e = wrap(end).clamp(0, d);
        (s, ceil_div((e - s).max(0), step))
    } else {
        let s = wrap(start).clamp(0, d - 1);
        let e = wrap(end).clamp(-1, d - 1);
        (s, ceil_div((s - e).max(0), step.saturating_neg()))
    }
}

impl Slice {
    /// This slice with the values of the parameter inputs filled in: `values[i]` is the
    /// value of input `i + 1` (`starts`, `ends`, `axes`, `steps`); missing ones keep the
    /// field. Defaults are applied, so the result's four lists have equal lengths when valid.
    pub fn with_values(&self, values: &[&Tensor]) -> Result<Slice, String> {
        let mut params = [
            self.starts.clone(),
            self.ends.clone(),
            self.axes.clone(),
            self.steps.clone(),
        ];
        for ((p, v), what) in params.iter_mut().zip(values).zip(PARAMS) {
            *p = int_vector(what, v)?;
        }
        let [starts, ends, mut axes, mut steps] = params;
        if axes.is_empty() {
            axes = (0..starts.len() as i64).collect();
        }
        if steps.is_empty() {
            steps = vec![1; starts.len()];
        }
        Ok(Slice {
            starts,
            ends,
            axes,
            steps,
        })
    }

    /// Per input dim: `(start, step)` and the output length, for a concrete input shape.
    pub fn resolve(&self, shape: &[usize]) -> Result<Vec<(i64, i64, usize)>, String> {
        let axes = self.check(shape.len())?;
        let mut out: Vec<(i64, i64, usize)> = shape.iter().map(|&d| (0, 1, d)).collect();
        for (i, &axis) in axes.iter().enumerate() {
            let (s, n) = resolve_slice(
                shape[axis] as i64,
                self.starts[i],
                self.ends[i],
                self.steps[i],
            );
            let step = if n > 1 { self.steps[i] } else { 1 };
            out[axis] = (s, step, n as usize);
        }
        Ok(out)
    }

    fn check(&self, rank: usize) -> Result<Vec<usize>, String> {
        let n = self.axes.len();
        if self.starts.len() != n || self.ends.len() != n || self.steps.len() != n {
            return Err("starts, ends, axes and steps must have equal lengths".into());
        }
        if self.steps.contains(&0) {
            return Err("slice step 0".into());
        }
        let axes: Vec<usize> = self
            .axes
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?;
        let mut sorted = axes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != axes.len() {
            return Err(format!("axis repeated in {:?}", self.axes));
        }
        Ok(axes)
    }

    fn infer_known(&self, x: &InferInput<'_>) -> Result<Vec<TypeShape>, String> {
        let axes = self.check(x.shape.len())?;
        let mut shape = x.shape.to_vec();
        for (i, &axis) in axes.iter().enumerate() {
            let d = &x.shape[axis];
            shape[axis] = match d.as_const() {
                Some(v) => {
                    DimExpr::Const(resolve_slice(v, self.starts[i], self.ends[i], self.steps[i]).1)
                }
                None => symbolic_len(d, self.starts[i], self.ends[i], self.steps[i]),
            };
        }
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }

    /// The output when some parameter input's value is unknown: the sliced axes (all of
    /// them when the axes are unknown) get unknown dims.
    fn infer_unknown(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let mut known = [
            Some(self.starts.clone()),
            Some(self.ends.clone()),
            Some(self.axes.clone()),
            Some(self.steps.clone()),
        ];
        for ((k, p), what) in known.iter_mut().zip(&inputs[1..]).zip(PARAMS) {
            *k = input_vector(what, p)?;
        }
        let rank = x.shape.len();
        let mut shape = x.shape.to_vec();
        let axes = match &known[2] {
            Some(axes) if axes.is_empty() => {
                let n = match inputs.get(1) {
                    Some(s) => known_len("starts", s)?,
                    None => self.starts.len(),
                };
                (0..n).collect()
            }
            Some(axes) => axes
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<Result<Vec<_>, _>>()?,
            None => (0..rank).collect(),
        };
        for axis in axes {
            let d = shape
                .get_mut(axis)
                .ok_or_else(|| format!("axis {axis} is out of range for rank {rank}"))?;
            *d = unknown_dim();
        }
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}

fn symbolic_len(d: &DimExpr, start: i64, end: i64, step: i64) -> DimExpr {
    let wrap = |v: i64| {
        if v < 0 {
            d.clone() + v
        } else {
            DimExpr::Const(v)
        }
    };
    let zero = DimExpr::Const(0);
    if step > 0 {
        let s = wrap(start).max(0).min(d.clone());
        let e = wrap(end).max(0).min(d.clone());
        (e - s).max(zero).ceil_div(step)
    } else {
        let s = wrap(start).max(0).min(d.clone() - 1);
        let e = wrap(end).max(-1).min(d.clone() - 1);
        (s - e).max(zero).ceil_div(step.saturating_neg())
    }
}

impl LayerOp for Slice {
    fn kind(&self) -> &'static str {
        "Slice"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 5)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1, 2, 3, 4]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let params = &inputs[1..];
        match params.iter().map(|p| p.value).collect::<Option<Vec<_>>>() {
            Some(values) => self.with_values(&values)?.infer_known(&inputs[0]),
            None => self.infer_unknown(inputs),
        }
    }
}
