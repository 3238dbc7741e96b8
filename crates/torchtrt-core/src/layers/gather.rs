//! Gather along an axis by integer indices.

use serde::{Deserialize, Serialize};

use super::{InferInput, LayerOp, TypeShape, normalize_axis};

/// `out[.., idx.., ..] = data[.., indices[idx..], ..]` along `axis` (ONNX `Gather`);
/// negative indices count from the end.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Gather {
    /// The axis of `data`, negative counting from the end.
    pub axis: i64,
}

impl LayerOp for Gather {
    fn kind(&self) -> &'static str {
        "Gather"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (data, idx) = (&inputs[0], &inputs[1]);
        if !matches!(
            idx.dtype,
            torchtrt_plugin_api::DType::I64 | torchtrt_plugin_api::DType::I32
        ) {
            return Err(format!(
                "Gather indices must be i32 or i64, got {}",
                idx.dtype
            ));
        }
        let axis = normalize_axis(self.axis, data.shape.len())?;
        let mut shape = data.shape[..axis].to_vec();
        shape.extend_from_slice(idx.shape);
        shape.extend_from_slice(&data.shape[axis + 1..]);
        Ok(vec![TypeShape::new(data.dtype, shape)])
    }
}
