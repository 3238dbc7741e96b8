//! Checked reads of what arrives through raw pointers: strings, arrays and counts.

use std::ffi::{CStr, c_char};

/// A count from the ABI as `usize`; negative counts are an error naming `what`.
pub(crate) fn count(n: i32, what: &str) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("{what}: negative count {n}"))
}

/// A count for the ABI; an error when it does not fit an `i32`.
pub(crate) fn to_count(n: usize, what: &str) -> Result<i32, String> {
    i32::try_from(n).map_err(|_| format!("{what}: {n} is too many"))
}

/// `len` elements at `ptr`; NULL is accepted only for `len == 0`.
///
/// # Safety
/// When `len > 0` and `ptr` is not NULL, `ptr` must point to `len` initialised elements
/// that stay valid and unmodified for `'a`.
pub(crate) unsafe fn slice<'a, T>(
    ptr: *const T,
    len: usize,
    what: &str,
) -> Result<&'a [T], String> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(format!("{what} is NULL but has {len} elements"));
    }
    if !ptr.is_aligned() {
        return Err(format!("{what} is not aligned"));
    }
    if len
        .checked_mul(size_of::<T>())
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(format!("{what}: {len} elements is too large"));
    }
    // SAFETY: non-NULL, aligned, size checked; validity is the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// `len` writable elements at `ptr`; NULL is accepted only for `len == 0`.
///
/// # Safety
/// When `len > 0` and `ptr` is not NULL, `ptr` must point to `len` initialised elements
/// that nothing else reads or writes during `'a`.
pub(crate) unsafe fn slice_mut<'a, T>(
    ptr: *mut T,
    len: usize,
    what: &str,
) -> Result<&'a mut [T], String> {
    // SAFETY: forwarded from the caller; this only checks the pointer.
    unsafe { slice(ptr.cast_const(), len, what) }?;
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: checked above; exclusivity is the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Writes `values` to `dst`, which the caller announced holds `nb` elements.
///
/// # Safety
/// A non-NULL `dst` must point to `nb` writable (possibly uninitialised) elements.
pub(crate) unsafe fn write_all<T: Copy>(
    dst: *mut T,
    nb: i32,
    values: &[T],
    what: &str,
) -> Result<(), String> {
    let nb = count(nb, what)?;
    if nb != values.len() {
        return Err(format!(
            "{what}: room for {nb}, but there are {}",
            values.len()
        ));
    }
    if nb > 0 && (dst.is_null() || !dst.is_aligned()) {
        return Err(format!("{what} is NULL or not aligned"));
    }
    for (i, v) in values.iter().enumerate() {
        // SAFETY: non-NULL, aligned, and `i < nb` writable elements by the caller's promise.
        unsafe { dst.add(i).write(*v) };
    }
    Ok(())
}

/// A NUL-terminated UTF-8 string; NULL and invalid UTF-8 are errors naming `what`.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string.
pub(crate) unsafe fn string(ptr: *const c_char, what: &str) -> Result<String, String> {
    if ptr.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's promise.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str()
        .map(str::to_string)
        .map_err(|_| format!("{what} is not valid UTF-8"))
}
