//! Reading a one-element integer input (an axis, a `k`) at run time.

use torchtrt_core::Tensor;
use torchtrt_core::plugin_api::DType;

/// The value of `t`, an i32/i64 tensor of one element, for `kernel`'s input `name`.
pub(super) fn scalar_value(kernel: &str, name: &str, t: &Tensor) -> Result<i64, String> {
    if !matches!(t.dtype(), DType::I64 | DType::I32) || t.numel() != 1 || t.rank() > 1 {
        return Err(format!(
            "{kernel}: {name} must be one i32 or i64 value, got {t}"
        ));
    }
    t.to_i64_vec()
        .and_then(|v| v.first().copied())
        .ok_or_else(|| format!("{kernel}: {name} {t} holds no integer"))
}
