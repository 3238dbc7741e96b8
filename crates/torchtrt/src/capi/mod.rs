//! The C API of `libtorchtrt.so` (`include/torchtrt.h`): the runtime API of
//! `torchtrt-runtime`, re-exported so this library exports the same functions, plus
//! compiling ONNX models ([`compile`]).

mod compile;

pub use compile::*;
pub use torchtrt_runtime::*;
