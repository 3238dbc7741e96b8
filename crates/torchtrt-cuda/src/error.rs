//! The crate's error type.

use cudarc::driver::DriverError;

/// What went wrong in the CUDA backend.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No usable CUDA driver or device on this machine.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// NVRTC (the run-time compiler) is not installed; only needed to compile kernels.
    #[error("NVRTC is not available: {0}")]
    NoNvrtc(String),
    /// A driver call failed.
    #[error("CUDA {call} failed: {message}")]
    Driver {
        /// The operation, e.g. `cuMemAlloc`.
        call: &'static str,
        /// The driver's error name and text.
        message: String,
    },
    /// NVRTC rejected a kernel source.
    #[error("NVRTC could not compile `{name}` for {arch}: {log}")]
    Compile {
        /// The program's name.
        name: String,
        /// The target, e.g. `sm_90`.
        arch: String,
        /// The compiler's log.
        log: String,
    },
    /// A bad argument: sizes that disagree, a missing kernel, an image for another device.
    #[error("{0}")]
    Invalid(String),
}

/// Results of this crate.
pub type CudaResult<T> = Result<T, CudaError>;

/// Adds the failed operation's name to a driver error.
pub(crate) fn driver(call: &'static str) -> impl FnOnce(DriverError) -> CudaError {
    move |e| {
        let name = e
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("CUresult {}", e.0 as i32));
        let text = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        CudaError::Driver {
            call,
            message: format!("{name}: {text}"),
        }
    }
}
