//! Errors of the backend, and the guard every exported function runs its body in: nothing
//! unwinds into Triton, every failure becomes a `TRITONSERVER_Error`.

use std::ffi::{CStr, CString};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::ffi::{self, TritonError, code};

/// A failure, with the `TRITONSERVER_Error_Code` Triton reports for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    /// `TRITONSERVER_Error_Code`.
    pub code: u32,
    /// What failed and where.
    pub message: String,
}

/// `Result` with [`BackendError`].
pub type Result<T> = std::result::Result<T, BackendError>;

impl BackendError {
    /// An error with `code`.
    pub fn new(code: u32, message: impl Into<String>) -> BackendError {
        BackendError {
            code,
            message: message.into(),
        }
    }

    /// `TRITONSERVER_ERROR_INVALID_ARG`: a bad request or configuration.
    pub fn invalid(message: impl Into<String>) -> BackendError {
        BackendError::new(code::INVALID_ARG, message)
    }

    /// `TRITONSERVER_ERROR_UNSUPPORTED`.
    pub fn unsupported(message: impl Into<String>) -> BackendError {
        BackendError::new(code::UNSUPPORTED, message)
    }

    /// `TRITONSERVER_ERROR_INTERNAL`.
    pub fn internal(message: impl Into<String>) -> BackendError {
        BackendError::new(code::INTERNAL, message)
    }

    /// The same error with `context: ` before its message.
    pub fn context(self, context: impl std::fmt::Display) -> BackendError {
        BackendError {
            code: self.code,
            message: format!("{context}: {}", self.message),
        }
    }

    /// A new `TRITONSERVER_Error` owned by the caller (null when the server's API is not
    /// there to create one).
    pub fn into_raw(self) -> *mut TritonError {
        let Ok(api) = ffi::api() else {
            return std::ptr::null_mut();
        };
        let message = CString::new(self.message.replace('\0', "\\0")).unwrap_or_default();
        // SAFETY: a valid code and NUL-terminated message; Triton copies the message.
        unsafe { (api.TRITONSERVER_ErrorNew)(self.code, message.as_ptr()) }
    }
}

impl From<torchtrt::Error> for BackendError {
    fn from(e: torchtrt::Error) -> BackendError {
        use torchtrt::Error as E;
        let code = match &e {
            E::Input(_) | E::InvalidArgument(_) => code::INVALID_ARG,
            E::Io { .. } => code::NOT_FOUND,
            E::NoKernel { .. } => code::UNSUPPORTED,
            _ => code::INTERNAL,
        };
        BackendError::new(code, e.to_string())
    }
}

impl From<&str> for BackendError {
    fn from(message: &str) -> BackendError {
        BackendError::internal(message)
    }
}

/// Takes ownership of an error a Triton call returned: `Ok` for null, else its code and
/// message (and the error is deleted).
pub fn check(err: *mut TritonError) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    let api = ffi::api()?;
    // SAFETY: a live error Triton returned; the message is read before the error is deleted.
    unsafe {
        let code = (api.TRITONSERVER_ErrorCode)(err);
        let message = CStr::from_ptr((api.TRITONSERVER_ErrorMessage)(err))
            .to_string_lossy()
            .into_owned();
        (api.TRITONSERVER_ErrorDelete)(err);
        Err(BackendError::new(code, message))
    }
}

/// Runs an exported function's body: its error, or a panic, becomes a `TRITONSERVER_Error`.
pub fn guard(what: &str, body: impl FnOnce() -> Result<()>) -> *mut TritonError {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => e.into_raw(),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            BackendError::internal(format!("{what}: the torchtrt backend panicked: {reason}"))
                .into_raw()
        }
    }
}

/// Writes a message to Triton's log (nothing when the server's API is missing).
pub fn log(level: u32, message: &str) {
    let Ok(api) = ffi::api() else {
        return;
    };
    let file = c"torchtrt";
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: NUL-terminated strings, copied by Triton.
    let err = unsafe { (api.TRITONSERVER_LogMessage)(level, file.as_ptr(), 0, message.as_ptr()) };
    let _ = check(err);
}

/// A C string Triton returned, as a Rust string (`""` for null).
///
/// # Safety
/// `ptr` must be null or a NUL-terminated string valid for the call.
pub unsafe fn c_str(ptr: *const std::ffi::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: per this function's contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}
