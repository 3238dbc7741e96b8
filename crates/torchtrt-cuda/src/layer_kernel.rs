//! A core layer with a CUDA kernel, as the runtime sees it: a [`Placement::Device`] kernel
//! that queues its [`DeviceKernel`] on the context's current stream, and for small integer
//! layers a host twin the runtime uses when every input is already on the host.

use torchtrt_core::backend::{DeviceContext, Kernel, Placement};
use torchtrt_core::tensor::Tensor;
use torchtrt_plugin_api::DeviceTensor;

use crate::context::CudaDeviceContext;
use crate::kernels::DeviceKernel;

pub(crate) struct DeviceLayerKernel {
    device_kernel: Box<dyn DeviceKernel>,
    /// A host kernel for the same layer, kept for layers computing shape-like integer
    /// tensors, so that they stay on the host when their inputs are there.
    host: Option<Box<dyn Kernel>>,
}

impl DeviceLayerKernel {
    pub(crate) fn new(
        device_kernel: Box<dyn DeviceKernel>,
        host: Option<Box<dyn Kernel>>,
    ) -> DeviceLayerKernel {
        DeviceLayerKernel {
            device_kernel,
            host,
        }
    }
}

impl Kernel for DeviceLayerKernel {
    fn execute(&self, _inputs: &[&Tensor], _outputs: &mut [Tensor]) -> Result<(), String> {
        Err("this layer runs on the CUDA device".into())
    }

    fn placement(&self) -> Placement {
        Placement::Device
    }

    fn enqueue(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        device: &mut dyn DeviceContext,
    ) -> Result<(), String> {
        let cuda = CudaDeviceContext::of(device)?;
        self.device_kernel
            .execute(inputs, outputs, cuda.current_stream())
    }

    fn host_twin(&self) -> Option<&dyn Kernel> {
        self.host.as_deref()
    }
}
