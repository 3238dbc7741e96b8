//! The [`Backend`] for engines targeted at a CUDA device.

use torchtrt_core::backend::{Backend, Kernel};
use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::DeviceKind;

use crate::device::CudaDevice;
use crate::error::CudaResult;

/// The CUDA backend of one device: reports the device's compute capability so the builder
/// stamps engines with it. Core layers get CUDA kernels layer by layer; until a layer has
/// one, `prepare` says so and the builder keeps that layer on the CPU.
#[derive(Clone, Debug)]
pub struct CudaBackend {
    device: CudaDevice,
}

impl CudaBackend {
    /// The backend of `cuda:ordinal`; `Err(NoDevice)` without a GPU.
    pub fn new(ordinal: usize) -> CudaResult<CudaBackend> {
        Ok(CudaBackend {
            device: CudaDevice::open(ordinal)?,
        })
    }

    /// The device.
    pub fn cuda_device(&self) -> &CudaDevice {
        &self.device
    }
}

impl Backend for CudaBackend {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn name(&self) -> String {
        format!("cuda:{}", self.device.ordinal())
    }

    fn compute_capability(&self) -> Option<(u32, u32)> {
        Some(self.device.compute_capability())
    }

    fn prepare(
        &self,
        layer: &LayerKind,
        _inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        Err(format!(
            "{}: no CUDA kernel for {} layers yet",
            self.name(),
            layer.op().kind()
        ))
    }
}
