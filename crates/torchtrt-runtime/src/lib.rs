//! `libtorchtrt_runtime.so`: the C API that deserializes and runs torchtrt engines, declared
//! in `include/torchtrt_runtime.h`. No compiler: a deployment ships this library, its
//! engines and, for the lean build (`--no-default-features`), the plugin libraries its
//! engines need (`libtorchtrt_plugins.so`), loaded with `ttrt_runtime_load_library`.
//!
//! Every exported function catches panics, checks its pointers, sizes and dtypes, and
//! returns a status; the reason of a failure is the calling thread's `ttrt_last_error()`.
//! The `torchtrt` crate exports the same functions from `libtorchtrt.so` and builds its
//! compile API on the handles and helpers public here.

mod context;
mod cuda;
mod engine;
mod error;
mod ptr;
mod runtime;
mod tensor;

pub use context::*;
pub use cuda::{cuda_backend, cuda_backends};
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
