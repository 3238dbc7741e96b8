//! Status codes, the thread-local last error, and the guard every exported function runs
//! its body in.

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use torchtrt_plugin_api::abi::{
    TTRT_ERROR_EXECUTION, TTRT_ERROR_INVALID_ARGUMENT, TTRT_ERROR_PANIC, TTRT_ERROR_UNSUPPORTED,
    TTRT_OK, TtrtStatus,
};

/// `TTRT_RUNTIME_API_VERSION`.
pub const TTRT_RUNTIME_API_VERSION: u32 = 1;
/// `TTRT_ERROR_INVALID_ENGINE`: truncated, corrupted, other version or target.
pub const TTRT_ERROR_INVALID_ENGINE: TtrtStatus = 16;
/// `TTRT_ERROR_PLUGIN_NOT_FOUND`: an engine's plugin has no creator registered.
pub const TTRT_ERROR_PLUGIN_NOT_FOUND: TtrtStatus = 17;
/// `TTRT_ERROR_LIBRARY`: an extension library failed to load.
pub const TTRT_ERROR_LIBRARY: TtrtStatus = 18;
/// `TTRT_ERROR_IO`: a file could not be read or written.
pub const TTRT_ERROR_IO: TtrtStatus = 19;
/// `TTRT_ERROR_BUFFER_TOO_SMALL`: an output buffer is smaller than the output.
pub const TTRT_ERROR_BUFFER_TOO_SMALL: TtrtStatus = 20;
/// `TTRT_ERROR_MODEL`: a model could not be imported.
pub const TTRT_ERROR_MODEL: TtrtStatus = 21;

/// A failure of a C API call: the status it returns and the message `ttrt_last_error`
/// reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CapiError {
    /// The status code.
    pub status: TtrtStatus,
    /// What failed and where.
    pub message: String,
}

impl CapiError {
    /// An error with `status`.
    pub fn new(status: TtrtStatus, message: impl Into<String>) -> CapiError {
        CapiError {
            status,
            message: message.into(),
        }
    }

    /// `TTRT_ERROR_INVALID_ARGUMENT`.
    pub fn invalid(message: impl Into<String>) -> CapiError {
        CapiError::new(TTRT_ERROR_INVALID_ARGUMENT, message)
    }

    /// `TTRT_ERROR_UNSUPPORTED`.
    pub fn unsupported(message: impl Into<String>) -> CapiError {
        CapiError::new(TTRT_ERROR_UNSUPPORTED, message)
    }
}

impl From<torchtrt_core::Error> for CapiError {
    fn from(e: torchtrt_core::Error) -> CapiError {
        use torchtrt_core::Error as E;
        let status = match &e {
            E::PluginNotFound { .. } => TTRT_ERROR_PLUGIN_NOT_FOUND,
            E::Engine(_) => TTRT_ERROR_INVALID_ENGINE,
            E::Load(_) | E::Library { .. } => TTRT_ERROR_LIBRARY,
            E::Io { .. } => TTRT_ERROR_IO,
            E::Input(_) | E::InvalidArgument(_) => TTRT_ERROR_INVALID_ARGUMENT,
            E::NoKernel { .. } => TTRT_ERROR_UNSUPPORTED,
            _ => TTRT_ERROR_EXECUTION,
        };
        CapiError::new(status, e.to_string())
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown panic")
}

/// Runs the body of the exported function `function`: a panic becomes
/// `TTRT_ERROR_PANIC`, an error its status; both set the thread's last error, prefixed with
/// `function`.
pub fn guard(function: &str, body: impl FnOnce() -> Result<(), CapiError>) -> TtrtStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => TTRT_OK,
        Ok(Err(e)) => {
            set_last_error(format!("{function}: {}", e.message));
            e.status
        }
        Err(payload) => {
            set_last_error(format!(
                "{function}: internal error (panic): {}",
                panic_message(payload.as_ref())
            ));
            TTRT_ERROR_PANIC
        }
    }
}

/// The message of the calling thread's last failed call, `""` if none. Valid until the
/// next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn ttrt_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
