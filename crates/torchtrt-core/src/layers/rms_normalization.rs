//! Root-mean-square normalization (ONNX `RMSNormalization`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::format_shape;

use super::normalization::broadcasts_to;
use super::{InferInput, LayerOp, Normalization, TypeShape, require_float};

/// `y = x / √(mean(x²) + epsilon) · scale`, the mean taken over `axes` (ONNX
/// `RMSNormalization`, axes `axis..rank`). The optional second input `scale` broadcasts to
/// `x`'s shape. Accumulated in f32 (f64 for f64 inputs).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RmsNormalization {
    /// The normalized axes, negative counting from the end; at least one, distinct.
    pub axes: Vec<i64>,
    /// Added to the mean square before the square root.
    pub epsilon: f32,
}

impl RmsNormalization {
    /// The sorted axes for `rank`; errors on none, repeats or out-of-range axes.
    pub fn resolved_axes(&self, rank: usize) -> Result<Vec<usize>, String> {
        Normalization {
            axes: self.axes.clone(),
            epsilon: self.epsilon,
        }
        .resolved_axes(rank)
    }
}

impl LayerOp for RmsNormalization {
    fn kind(&self) -> &'static str {
        "RmsNormalization"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        require_float("RmsNormalization", x.dtype)?;
        if inputs.iter().any(|i| i.dtype != x.dtype) {
            return Err("RmsNormalization inputs must share one dtype".into());
        }
        if !self.epsilon.is_finite() || self.epsilon < 0.0 {
            return Err(format!(
                "epsilon {} must be finite and not negative",
                self.epsilon
            ));
        }
        self.resolved_axes(x.shape.len())?;
        if let Some(s) = inputs.get(1)
            && !broadcasts_to(s.shape, x.shape)
        {
            return Err(format!(
                "scale {} does not broadcast to the input {}",
                format_shape(s.shape),
                format_shape(x.shape)
            ));
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
