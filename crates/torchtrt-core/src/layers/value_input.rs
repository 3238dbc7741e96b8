//! Reading the values of small integer inputs (shape tensors, axes, pads, repeats) in shape
//! rules and kernels.

use torchtrt_plugin_api::{DType, format_shape};

use super::InferInput;
use crate::tensor::Tensor;

/// The elements of an integer tensor of rank 0 or 1; `what` names the input in errors.
pub fn int_vector(what: &str, t: &Tensor) -> Result<Vec<i64>, String> {
    if t.rank() > 1 {
        return Err(format!("{what} must be 1-D, got {t}"));
    }
    if t.dtype() == DType::Bool {
        return Err(format!("{what} must be an integer tensor, got {t}"));
    }
    t.to_i64_vec()
        .ok_or_else(|| format!("{what} must be an integer tensor, got {t}"))
}

/// The values of a 1-D integer input: `Ok(None)` when they are not known at build time.
pub fn input_vector(what: &str, input: &InferInput<'_>) -> Result<Option<Vec<i64>>, String> {
    if !input.dtype.is_integer() {
        return Err(format!(
            "{what} must be an integer tensor, got {}",
            input.dtype
        ));
    }
    input.value.map(|v| int_vector(what, v)).transpose()
}

/// The number of elements of a rank-0 or 1-D input, which must be known at build time.
pub fn known_len(what: &str, input: &InferInput<'_>) -> Result<usize, String> {
    match input.shape {
        [] => Ok(1),
        [n] => n
            .as_const()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("{what} needs a length known at build time, got [{n}]")),
        s => Err(format!("{what} must be 1-D, got {}", format_shape(s))),
    }
}
