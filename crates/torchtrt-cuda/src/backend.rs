//! The [`Backend`] for engines targeted at a CUDA device.

use std::sync::Arc;

use torchtrt_core::backend::{Backend, Kernel};
use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::{DeviceKind, Plugin};

use crate::device::CudaDevice;
use crate::error::CudaResult;
use crate::plugin_kernel::StagedPluginKernel;
use crate::stream::Stream;

/// The CUDA backend of one device. Engines built with it are stamped with the device's
/// compute capability. Plugin layers the builder placed on CUDA run their CUDA kernels on
/// the backend's stream; core layers run on the `host` backend until they get CUDA kernels
/// (see docs/cuda.md for the device-resident execution path this grows into).
#[derive(Clone)]
pub struct CudaBackend {
    device: CudaDevice,
    stream: Arc<Stream>,
    host: Arc<dyn Backend>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaBackend({:?}, host {})",
            self.device,
            self.host.name()
        )
    }
}

impl CudaBackend {
    /// The backend of `cuda:ordinal`, with `host` preparing the layers that have no CUDA
    /// kernel yet; `Err(NoDevice)` without a GPU.
    pub fn new(ordinal: usize, host: Arc<dyn Backend>) -> CudaResult<CudaBackend> {
        let device = CudaDevice::open(ordinal)?;
        let stream = Arc::new(device.new_stream()?);
        Ok(CudaBackend {
            device,
            stream,
            host,
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
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        self.host.prepare(layer, inputs)
    }

    fn plugin_kernel(&self, plugin: &Arc<dyn Plugin>) -> Option<Result<Box<dyn Kernel>, String>> {
        Some(Ok(Box::new(StagedPluginKernel::new(
            plugin.clone(),
            self.device.clone(),
            self.stream.clone(),
        ))))
    }
}
