//! Mean/variance normalization over axes, with an optional scale and bias.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, normalize_axis, require_float};

/// `y = (x − mean) / √(var + epsilon)`, mean and population variance taken over `axes`
/// (TensorRT's `INormalizationLayer`). An optional second input `scale` and third input
/// `bias` broadcast to `x`'s shape and are applied afterwards, `y · scale + bias`, so ONNX
/// `LayerNormalization` is one layer and `GroupNormalization` a reshape, this layer, a
/// reshape and an affine step. Statistics are accumulated in f32 (f64 for f64 inputs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Normalization {
    /// The normalized axes, negative counting from the end; at least one, distinct.
    pub axes: Vec<i64>,
    /// Added to the variance before the square root.
    pub epsilon: f32,
}

impl Normalization {
    /// The sorted axes for `rank`; errors on none, repeats or out-of-range axes.
    pub fn resolved_axes(&self, rank: usize) -> Result<Vec<usize>, String> {
        if self.axes.is_empty() {
            return Err("Normalization needs at least one axis".into());
        }
        let mut axes: Vec<usize> = self
            .axes
            .iter()
            .map(|&a| normalize_axis(a, rank))
            .collect::<Result<_, _>>()?;
        axes.sort_unstable();
        let n = axes.len();
        axes.dedup();
        if axes.len() != n {
            return Err(format!("axis repeated in {:?}", self.axes));
        }
        Ok(axes)
    }
}

impl LayerOp for Normalization {
    fn kind(&self) -> &'static str {
        "Normalization"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("Normalization", x.dtype)?;
        if inputs.iter().any(|i| i.dtype != x.dtype) {
            return Err("Normalization inputs must share one dtype".into());
        }
        if !self.epsilon.is_finite() || self.epsilon < 0.0 {
            return Err(format!(
                "epsilon {} must be finite and not negative",
                self.epsilon
            ));
        }
        self.resolved_axes(x.shape.len())?;
        for (name, t) in ["scale", "bias"].iter().zip(&inputs[1..]) {
            if !broadcasts_to(t.shape, x.shape) {
                return Err(format!(
                    "{name} {} does not broadcast to the input {}",
                    format_shape(t.shape),
                    format_shape(x.shape)
                ));
            }
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}

/// Whether `t` broadcasts to `x` without growing it: aligned from the end, each dim of `t`
/// is 1 or equal to `x`'s; symbolic dims that may agree are left to the run-time check.
pub(super) fn broadcasts_to(t: &[DimExpr], x: &[DimExpr]) -> bool {
    t.len() <= x.len()
        && t.iter().rev().zip(x.iter().rev()).all(|(a, b)| {
            a == b
                || match (a.as_const(), b.as_const()) {
                    (Some(1), _) => true,
                    (Some(u), Some(v)) => u == v,
                    _ => true,
                }
        })
}
