//! The C API that deserializes and runs torchtrt engines, declared in
//! `include/torchtrt_runtime.h`, over the one execution context. No compiler:
//! `libtorchtrt_runtime.so` (crate `torchtrt-runtime`) exports these functions for
//! deployments, `libtorchtrt.so` (crate `torchtrt`) exports them beside its compile API.
//! Without the `builtin-plugins` feature (the lean runtime) plugins come only from the
//! libraries loaded with `ttrt_runtime_load_library`.
//!
//! Every exported function catches panics, checks its pointers, sizes and dtypes, and
//! returns a status; the reason of a failure is the calling thread's `ttrt_last_error()`.
//! The `torchtrt` crate builds its compile API on the handles and helpers public here.

mod context;
mod engine;
mod error;
mod ptr;
mod runtime;
mod tensor;

pub use context::*;
pub use engine::*;
pub use error::{
    CapiError, TTRT_ERROR_BUFFER_TOO_SMALL, TTRT_ERROR_INVALID_ENGINE, TTRT_ERROR_IO,
    TTRT_ERROR_LIBRARY, TTRT_ERROR_MODEL, TTRT_ERROR_PLUGIN_NOT_FOUND, TTRT_RUNTIME_API_VERSION,
    guard, ttrt_last_error,
};
pub use ptr::{c_str, out_ptr, reference};
pub use runtime::*;
pub use tensor::TtrtTensor;
pub use torchtrt_plugin_api::abi::{TtrtStatus, TtrtTensorDesc};
