//! torchtrt-cpu: CPU kernels for every core layer kind of torchtrt.
//!
//! [`CpuBackend`] turns a [`LayerKind`](torchtrt_core::LayerKind) into a ready-to-run
//! [`Kernel`](torchtrt_core::Kernel). Kernels follow the ONNX operator definitions, run
//! multithreaded on rayon (the global pool, or one the backend owns), and compute f16 and
//! bf16 in f32. Matrix products and convolutions go through the `gemm` crate, behind the
//! internal `linalg` module that fused epilogues extend.

mod backend;
mod dispatch;
mod kernels;
mod linalg;
mod math;
mod parallel;
mod pool;
mod scalar;
mod scratch;
mod simd;
mod strided;
mod tensor_access;

pub use backend::CpuBackend;

/// The instruction-set level the kernels run at in this process (`generic`, `v3` or `v4`):
/// the CPU's, capped by `TORCHTRT_CPU_SIMD`.
pub fn simd_level() -> &'static str {
    simd::level_name()
}
