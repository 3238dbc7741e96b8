//! Strided slices (ONNX `Slice` semantics, static parameters).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DimExpr;

use super::{InferInput, LayerOp, TypeShape, normalize_axis};

/// Takes `starts[i]..ends[i]` with `steps[i]` along `axes[i]`. Negative starts/ends count
/// from the end; out-of-range values clamp, as in ONNX.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// The first index and the length of a slice of a dim of size `d`.
pub fn resolve_slice(d: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    if step > 0 {
        let s = wrap(start).clamp(0, d);
        let e = wrap(end).clamp(0, d);
        (s, ((e - s).max(0) + step - 1) / step)
    } else {
        let s = wrap(start).clamp(0, (d - 1).max(0));
        let e = wrap(end).clamp(-1, d - 1);
        let n = (s - e).max(0);
        (s, (n + (-step) - 1) / (-step))
    }
}

impl Slice {
    /// Per input dim: `(start, step)` and the output length, for a concrete input shape.
    pub fn resolve(&self, shape: &[usize]) -> Result<Vec<(i64, i64, usize)>, String> {
        let mut out: Vec<(i64, i64, usize)> = shape.iter().map(|&d| (0, 1, d)).collect();
        for (i, &a) in self.axes.iter().enumerate() {
            let axis = normalize_axis(a, shape.len())?;
            let (s, n) = resolve_slice(
                shape[axis] as i64,
                self.starts[i],
                self.ends[i],
                self.steps[i],
            );
            out[axis] = (s, self.steps[i], n as usize);
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
        (s - e).max(zero).ceil_div(-step)
    }
}

impl LayerOp for Slice {
    fn kind(&self) -> &'static str {
        "Slice"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
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
}
