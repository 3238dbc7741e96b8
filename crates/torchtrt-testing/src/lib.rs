//! Test support shared by every torchtrt suite, so that no suite can pass a kernel that
//! another would fail:
//!
//! - [`compare`]: one comparison of results with references. Same-signed infinities match
//!   exactly, NaN matches only NaN, integers and bools compare exactly (int64 without going
//!   through f64), floats within a per-dtype tolerance relative to each element with an
//!   absolute floor; a failure names the worst element.
//! - [`sentinel`]: what fills an output before a kernel runs (a NaN for floats, `0xA5` bytes
//!   for integers and bools), so an element the kernel never writes fails the comparison.
//! - [`tensor`]: both applied to core [`Tensor`](torchtrt_core::Tensor)s.
//! - [`values`]: seeded streams of inputs, uniform in a range.

pub mod compare;
pub mod sentinel;
pub mod tensor;
pub mod values;

pub use compare::{Mismatch, Tol, check_exact, check_floats, check_floats_by, close};
pub use tensor::{check_tensor, fill_sentinel, sentinel_like, sentinel_tensor};
pub use values::{uniform, values};
