//! The CUDA side shared by the built-in plugins: their CUDA C programs and launches. The
//! host's runtime (handed over in each [`CudaLaunch`]) compiles the programs for the launch
//! device, stores the images in engines, caches modules and queues the kernels; this crate
//! loads no driver of its own.
//!
//! [`CudaLaunch`]: torchtrt_plugin_api::CudaLaunch

mod check;
mod common;
mod runtime;

pub(crate) use common::COMMON;
pub(crate) use runtime::{Args, Program, constant, launch, resident_blocks};

use torchtrt_plugin_api::DType;

/// The suffix of a kernel's name for its element type (`gelu_erf_f16`).
pub(crate) fn suffix(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("f32"),
        DType::F16 => Some("f16"),
        DType::BF16 => Some("bf16"),
        _ => None,
    }
}

/// Every CUDA C program of the built-in plugins, complete as the host compiles it (for
/// compile checks and resource reports; launches name their program themselves).
pub fn programs() -> Vec<torchtrt_plugin_api::CudaProgram<'static>> {
    [
        &crate::gelu::cuda::PROGRAM,
        &crate::instance_norm::cuda::PROGRAM,
        &crate::interpolate::cuda::PROGRAM,
        &crate::interpolate::cuda_linear::PROGRAM,
        &crate::interpolate::cuda_pool::PROGRAM,
        &crate::nms::cuda::PROGRAM,
        &crate::normalize::cuda::PROGRAM,
    ]
    .into_iter()
    .map(Program::cuda)
    .collect()
}
