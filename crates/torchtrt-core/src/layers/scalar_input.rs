//! Reading a scalar integer input (an axis, a `k`) that shape rules and kernels need.

use torchtrt_plugin_api::format_shape;

use super::InferInput;

/// Checks that `input` is an i32/i64 scalar or one-element 1-D tensor named `what`, and
/// returns its value when known.
pub(crate) fn scalar_input(input: &InferInput<'_>, what: &str) -> Result<Option<i64>, String> {
    use torchtrt_plugin_api::DType;
    if !matches!(input.dtype, DType::I64 | DType::I32) {
        return Err(format!("{what} must be i32 or i64, got {}", input.dtype));
    }
    let single = match input.shape {
        [] => true,
        [n] => n.as_const().is_none_or(|n| n == 1),
        _ => false,
    };
    if !single {
        return Err(format!(
            "{what} must hold one value, got shape {}",
            format_shape(input.shape)
        ));
    }
    let Some(v) = input.value else {
        return Ok(None);
    };
    match v.to_i64_vec().as_deref() {
        Some([k]) => Ok(Some(*k)),
        _ => Err(format!("{what} must hold one integer, got {v}")),
    }
}
