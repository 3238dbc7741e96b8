//! `libtorchtrt_runtime.so`: the C API that deserializes and runs torchtrt engines, declared
//! in `include/torchtrt_runtime.h` and implemented by `torchtrt-capi`. No compiler: a
//! deployment ships this library, its engines and, for the lean build
//! (`--no-default-features`), the plugin libraries its engines need
//! (`libtorchtrt_plugins.so`), loaded with `ttrt_runtime_load_library`.

pub use torchtrt_capi::*;
