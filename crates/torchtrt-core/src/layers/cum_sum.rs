//! Cumulative sum along an axis given as a tensor.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::scalar_input::scalar_input;
use super::{InferInput, LayerOp, TypeShape, normalize_axis};

/// Running sums of the first input along the axis held by the second input, an i32/i64
/// scalar (ONNX `CumSum`): `y[…, i, …] = Σ x[…, j, …]` over `j ≤ i` (`j < i` when
/// `exclusive`; `j ≥ i` or `j > i` when `reverse`). Floats accumulate in f32 (f64 for f64),
/// integers wrap.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CumSum {
    /// Leave out the element itself.
    pub exclusive: bool,
    /// Sum from the end of the axis.
    pub reverse: bool,
}

impl LayerOp for CumSum {
    fn kind(&self) -> &'static str {
        "CumSum"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if x.dtype == DType::Bool {
            return Err("CumSum is not defined for bool".into());
        }
        if let Some(axis) = scalar_input(&inputs[1], "the axis input")? {
            normalize_axis(axis, x.shape.len())?;
        } else if x.shape.is_empty() {
            return Err("CumSum needs an input of rank ≥ 1".into());
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
