//! Dtype dispatch: macros that bind a Rust element type to a [`DType`] and run a generic
//! body with it, or give an error naming the operation and the unsupported dtype.
//!
//! [`DType`]: torchtrt_core::plugin_api::DType

/// Runs `$body` with `$t` bound to the storage type of a floating-point dtype.
macro_rules! with_float {
    ($dtype:expr, $what:expr, $t:ident => $body:expr) => {{
        use torchtrt_core::plugin_api::DType;
        match $dtype {
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::F16 => {
                type $t = half::f16;
                $body
            }
            DType::BF16 => {
                type $t = half::bf16;
                $body
            }
            DType::F64 => {
                type $t = f64;
                $body
            }
            other => Err(format!("{} has no CPU kernel for {other}", $what)),
        }
    }};
}

/// Runs `$body` with `$t` bound to the storage type of an integer dtype (not bool).
macro_rules! with_int {
    ($dtype:expr, $what:expr, $t:ident => $body:expr) => {{
        use torchtrt_core::plugin_api::DType;
        match $dtype {
            DType::I64 => {
                type $t = i64;
                $body
            }
            DType::I32 => {
                type $t = i32;
                $body
            }
            DType::I16 => {
                type $t = i16;
                $body
            }
            DType::I8 => {
                type $t = i8;
                $body
            }
            DType::U8 => {
                type $t = u8;
                $body
            }
            DType::U16 => {
                type $t = u16;
                $body
            }
            DType::U32 => {
                type $t = u32;
                $body
            }
            DType::U64 => {
                type $t = u64;
                $body
            }
            other => Err(format!("{} has no CPU kernel for {other}", $what)),
        }
    }};
}

/// Runs `$body` with `$t` bound to an unsigned type as wide as one element of `$dtype`:
/// for kernels that only move elements.
macro_rules! with_width {
    ($dtype:expr, $t:ident => $body:expr) => {{
        match $dtype.size() {
            1 => {
                type $t = u8;
                $body
            }
            2 => {
                type $t = u16;
                $body
            }
            4 => {
                type $t = u32;
                $body
            }
            _ => {
                type $t = u64;
                $body
            }
        }
    }};
}

pub(crate) use {with_float, with_int, with_width};
