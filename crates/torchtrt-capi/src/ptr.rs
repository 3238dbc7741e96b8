//! Checked access to the pointers C callers pass.

use std::ffi::{CStr, c_char};

use crate::error::CapiError;

/// The UTF-8 string at `p`, or an error naming the argument `what` when it is NULL or not
/// UTF-8.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string valid for `'a`.
pub unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, CapiError> {
    if p.is_null() {
        return Err(CapiError::invalid(format!("`{what}` is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|e| CapiError::invalid(format!("`{what}` is not UTF-8: {e}")))
}

/// The object behind a handle, or an error naming the argument `what` when it is NULL.
///
/// # Safety
/// `p` is NULL or a valid pointer for `'a`.
pub unsafe fn reference<'a, T>(p: *const T, what: &str) -> Result<&'a T, CapiError> {
    // SAFETY: forwarded from the caller.
    unsafe { p.as_ref() }.ok_or_else(|| CapiError::invalid(format!("`{what}` is NULL")))
}

/// The object behind a mutable handle or out-pointer, or an error naming `what` when NULL.
///
/// # Safety
/// `p` is NULL or a valid, unaliased pointer for `'a`.
pub unsafe fn out_ptr<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, CapiError> {
    // SAFETY: forwarded from the caller.
    unsafe { p.as_mut() }.ok_or_else(|| CapiError::invalid(format!("`{what}` is NULL")))
}
