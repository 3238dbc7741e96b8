//! The CUDA side shared by the built-in plugins: finding the driver, compiling each
//! plugin's CUDA C with NVRTC for the launch device's architecture, loading and caching
//! the modules per device, and launching on the stream a [`CudaLaunch`] hands over.
//!
//! Compiled images are kept per `(program, architecture)` for the life of the process;
//! [`kernel_images`] and [`install_kernel_images`] let a host that stores them (an engine
//! built for a GPU) run plugins later without NVRTC.
//!
//! [`CudaLaunch`]: torchtrt_plugin_api::CudaLaunch

mod check;
mod common;
mod runtime;

pub(crate) use common::COMMON;
#[cfg(test)]
pub(crate) use runtime::assert_compiles;
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
pub use runtime::{KernelImage, install_kernel_images, kernel_images};
