//! A tensor of a run-time shape filled with one value (ONNX `ConstantOfShape`).

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, Element};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, unknown_dim};
use crate::tensor::Tensor;

/// A tensor whose shape is the value of input 0 (a 1-D integer tensor, empty for a scalar),
/// every element equal to `value` (ONNX `ConstantOfShape`; the default fills f32 zeros).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConstantOfShape {
    /// Element type of the output.
    pub dtype: DType,
    /// The fill value: one element of `dtype`, little-endian bytes.
    pub value: Vec<u8>,
}

impl Default for ConstantOfShape {
    fn default() -> ConstantOfShape {
        ConstantOfShape::new(0f32)
    }
}

impl ConstantOfShape {
    /// Fills with `value`.
    pub fn new<T: Element>(value: T) -> ConstantOfShape {
        ConstantOfShape {
            dtype: T::DTYPE,
            value: bytemuck::bytes_of(&value).to_vec(),
        }
    }

    /// Fills with the one element of `value` (ONNX's `value` attribute, any dtype).
    pub fn from_tensor(value: &Tensor) -> Result<ConstantOfShape, String> {
        if value.numel() != 1 {
            return Err(format!("the fill value must have one element, got {value}"));
        }
        Ok(ConstantOfShape {
            dtype: value.dtype(),
            value: value.bytes().to_vec(),
        })
    }

    /// The fill value as a scalar tensor.
    pub fn value_tensor(&self) -> Result<Tensor, String> {
        Tensor::from_bytes(self.dtype, &[], &self.value).map_err(|_| {
            format!(
                "the fill value has {} bytes, but one {} element has {}",
                self.value.len(),
                self.dtype,
                self.dtype.size()
            )
        })
    }
}

impl LayerOp for ConstantOfShape {
    fn kind(&self) -> &'static str {
        "ConstantOfShape"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[0]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        self.value_tensor()?;
        let what = "the shape input of ConstantOfShape";
        let shape = match input_vector(what, &inputs[0])? {
            Some(dims) => dims
                .iter()
                .map(|&d| {
                    if d < 0 {
                        Err(format!("{what} has a negative dim: {dims:?}"))
                    } else {
                        Ok(DimExpr::Const(d))
                    }
                })
                .collect::<Result<_, _>>()?,
            None => vec![unknown_dim(); known_len(what, &inputs[0])?],
        };
        Ok(vec![TypeShape::new(self.dtype, shape)])
    }
}
