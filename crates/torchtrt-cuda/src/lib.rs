//! torchtrt's CUDA backend.
//!
//! Everything here loads the CUDA driver (and, for compilation, NVRTC) at run time, so the
//! crate builds and links on machines without a CUDA toolkit. Before the first driver call
//! [`probe`] checks that the libraries exist and that a device is present; without one every
//! entry point returns [`CudaError::NoDevice`] instead of panicking.
//!
//! - [`CudaDevice`]: one GPU's primary context, its compute capability and name.
//! - [`Stream`], [`Event`]: ordered work queues and timing.
//! - [`DeviceBuffer`], [`CachingAllocator`]: device memory, reused across runs.
//! - [`compile`], [`KernelImage`], [`Module`]: CUDA C compiled by NVRTC into PTX and cubin
//!   bytes that an engine stores; loading them back needs only the driver.
//! - [`CudaBackend`]: the [`torchtrt_core::backend::Backend`] for engines targeted at a GPU;
//!   its engines carry their compiled programs, the plugins' included.
//! - [`PluginPrograms`]: the CUDA runtime plugins launch through (NVRTC, module cache,
//!   argument checks, occupancy, constants), one per device.
//! - [`CudaDeviceContext`]: what one execution context of a CUDA engine holds on the device
//!   (stream, memory pools, CUDA graphs); the core `ExecutionContext` runs every engine.

mod backend;
mod blas;
mod blas_lt;
mod context;
mod device;
mod error;
mod images;
pub mod kernels;
mod launch;
mod layer_kernel;
mod memory;
mod module;
mod nvrtc;
mod plugin_kernel;
mod plugin_runtime;
pub mod probe;
mod shared;
mod stream;
mod timing;

pub use backend::CudaBackend;
pub use blas::{BatchStrides, Blas, Gemm, GemmType};
pub use blas_lt::Fused;
pub use context::CudaDeviceContext;
pub use device::CudaDevice;
pub use error::{CudaError, CudaResult};
pub use launch::{Dim3, KernelArgs};
pub use memory::{CachingAllocator, DeviceBuffer, ScratchGuard, ScratchPool};
pub use module::{Function, Module};
pub use nvrtc::{Arch, KernelImage, compile};
pub use plugin_runtime::{PluginLauncher, PluginPrograms, StreamRuntime, program_key};
pub use shared::{backend, backends};
pub use stream::{Event, Stream};
