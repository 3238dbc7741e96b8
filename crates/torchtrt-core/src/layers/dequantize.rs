//! Dequantization of integers to floats (ONNX `DequantizeLinear`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::quantize::check_scales;
use super::{InferInput, LayerOp, TypeShape};

/// `y = (x − zero_point) · scale`, in the scale's float type. Inputs: `x` (`I8`, `U8`, `I16`,
/// `U16` or `I32`), `scale` (a scalar or, per axis, a vector of `x.shape[axis]`), and an optional
/// `zero_point` of `x`'s type shaped like `scale` (zero when absent).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dequantize {
    /// The axis a vector scale runs along, negative counting from the end.
    pub axis: i64,
}

impl LayerOp for Dequantize {
    fn kind(&self) -> &'static str {
        "Dequantize"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 3)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if !matches!(
            x.dtype,
            DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32
        ) {
            return Err(format!(
                "Dequantize reads I8, U8, I16, U16 or I32, not {}",
                x.dtype
            ));
        }
        check_scales("Dequantize", self.axis, inputs, x.dtype)?;
        Ok(vec![TypeShape::new(inputs[1].dtype, x.shape.to_vec())])
    }
}
