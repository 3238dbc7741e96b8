//! Kernel building blocks shared by the plugins: element conversion, instruction-set
//! dispatch, parallel chunking and fast vectorisable math.

pub(crate) mod float;
pub(crate) mod math;
pub(crate) mod par;
pub(crate) mod simd;

pub(crate) use float::Float;
