//! The values of a plugin's shape inputs, as shape rules and launches see them.

use crate::dtype::DType;
use crate::error::{PluginError, PluginResult};

/// What is known of one shape input's values (TensorRT's shape-tensor inputs): small 1-D
/// integer or floating-point tensors whose values decide output shapes. At build time the
/// values are known when they follow from constants; at run time they always are.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ShapeValues {
    /// Not known yet (or not a shape input).
    #[default]
    Unknown,
    /// The values of an integer tensor.
    Ints(Vec<i64>),
    /// The values of a floating-point tensor, widened to `f64`.
    Floats(Vec<f64>),
}

/// The most elements a shape input may have.
pub const MAX_SHAPE_VALUES: usize = 1 << 16;

impl ShapeValues {
    /// Whether the values are known.
    pub fn is_known(&self) -> bool {
        !matches!(self, ShapeValues::Unknown)
    }

    /// Number of values, when known.
    pub fn len(&self) -> Option<usize> {
        match self {
            ShapeValues::Unknown => None,
            ShapeValues::Ints(v) => Some(v.len()),
            ShapeValues::Floats(v) => Some(v.len()),
        }
    }

    /// Whether the values are known and there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The values of an integer tensor; `None` when unknown or floating-point.
    pub fn ints(&self) -> Option<&[i64]> {
        match self {
            ShapeValues::Ints(v) => Some(v),
            _ => None,
        }
    }

    /// The values as `f64` (integers converted); `None` when unknown.
    pub fn floats(&self) -> Option<Vec<f64>> {
        match self {
            ShapeValues::Unknown => None,
            ShapeValues::Ints(v) => Some(v.iter().map(|&x| x as f64).collect()),
            ShapeValues::Floats(v) => Some(v.clone()),
        }
    }

    /// Reads the little-endian elements of a tensor of `dtype` holding `bytes`; an error for
    /// dtypes that cannot be shape values, a length that is not whole elements, or more than
    /// [`MAX_SHAPE_VALUES`] elements.
    pub fn from_bytes(dtype: DType, bytes: &[u8]) -> PluginResult<ShapeValues> {
        let size = dtype.size();
        if size == 0 || !bytes.len().is_multiple_of(size) || bytes.len() / size > MAX_SHAPE_VALUES {
            return Err(PluginError::InvalidInput(format!(
                "a shape input of {} bytes of {dtype} (at most {MAX_SHAPE_VALUES} whole elements)",
                bytes.len()
            )));
        }
        let words = bytes.chunks_exact(size);
        let ints = |f: fn(&[u8]) -> i64| ShapeValues::Ints(words.clone().map(f).collect());
        let floats = |f: fn(&[u8]) -> f64| ShapeValues::Floats(words.clone().map(f).collect());
        Ok(match dtype {
            DType::I64 => ints(|w| i64::from_le_bytes(w.try_into().unwrap_or_default())),
            DType::I32 => ints(|w| i64::from(i32::from_le_bytes(w.try_into().unwrap_or_default()))),
            DType::F32 => {
                floats(|w| f64::from(f32::from_le_bytes(w.try_into().unwrap_or_default())))
            }
            DType::F64 => floats(|w| f64::from_le_bytes(w.try_into().unwrap_or_default())),
            DType::F16 => {
                floats(|w| f64::from(half::f16::from_le_bytes(w.try_into().unwrap_or_default())))
            }
            DType::BF16 => {
                floats(|w| f64::from(half::bf16::from_le_bytes(w.try_into().unwrap_or_default())))
            }
            other => {
                return Err(PluginError::InvalidInput(format!(
                    "a shape input of {other}: shape inputs are i32, i64 or floating point"
                )));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_shape_dtype() {
        let ints: Vec<u8> = [3i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            ShapeValues::from_bytes(DType::I64, &ints).unwrap(),
            ShapeValues::Ints(vec![3, -1])
        );
        let i32s: Vec<u8> = [7i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            ShapeValues::from_bytes(DType::I32, &i32s).unwrap().ints(),
            Some(&[7i64, 9][..])
        );
        let f32s: Vec<u8> = [0.5f32, 2.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            ShapeValues::from_bytes(DType::F32, &f32s).unwrap().floats(),
            Some(vec![0.5, 2.25])
        );
    }

    #[test]
    fn refuses_ragged_bytes_and_other_dtypes() {
        assert!(ShapeValues::from_bytes(DType::I64, &[0; 7]).is_err());
        assert!(ShapeValues::from_bytes(DType::Bool, &[1]).is_err());
        assert!(ShapeValues::from_bytes(DType::F32, &vec![0; 4 * (MAX_SHAPE_VALUES + 1)]).is_err());
    }
}
