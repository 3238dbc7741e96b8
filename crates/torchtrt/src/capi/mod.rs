//! The C API of `libtorchtrt.so` (`include/torchtrt.h`): the runtime API of
//! `torchtrt-runtime`, re-exported so this library exports the same functions, plus
//! compiling ONNX models ([`compile`]) and loading extension libraries with their
//! converters and custom ops ([`extension`]).

mod compile;
mod extension;

pub use compile::*;
pub use extension::*;
pub use torchtrt_capi::*;
