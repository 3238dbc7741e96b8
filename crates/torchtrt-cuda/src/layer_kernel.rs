//! A core layer with a CUDA kernel. The device-resident context runs its [`DeviceKernel`]
//! directly (or, for small integer layers whose inputs are all on the host, its host
//! kernel); the host-tensor runtime goes through [`Kernel::execute`], which stages inputs
//! to the device, runs the device kernel on the backend's stream and copies outputs back.

use std::any::Any;
use std::sync::Arc;

use torchtrt_core::backend::Kernel;
use torchtrt_core::tensor::Tensor;
use torchtrt_plugin_api::DeviceTensor;

use crate::device::CudaDevice;
use crate::error::CudaResult;
use crate::kernels::DeviceKernel;
use crate::memory::DeviceBuffer;
use crate::stream::Stream;

pub(crate) struct DeviceLayerKernel {
    pub(crate) device_kernel: Box<dyn DeviceKernel>,
    /// A host kernel for the same layer, kept for layers computing shape-like integer
    /// tensors, so that they stay on the host when their inputs are there.
    pub(crate) host: Option<Box<dyn Kernel>>,
    device: CudaDevice,
    stream: Arc<Stream>,
}

impl DeviceLayerKernel {
    pub(crate) fn new(
        device_kernel: Box<dyn DeviceKernel>,
        host: Option<Box<dyn Kernel>>,
        device: CudaDevice,
        stream: Arc<Stream>,
    ) -> DeviceLayerKernel {
        DeviceLayerKernel {
            device_kernel,
            host,
            device,
            stream,
        }
    }

    fn staged(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> CudaResult<Result<(), String>> {
        let alloc = |n: usize| self.device.allocator().alloc(n);
        let mut held: Vec<DeviceBuffer> = Vec::with_capacity(inputs.len() + outputs.len());
        let mut ins = Vec::with_capacity(inputs.len());
        for t in inputs {
            let buf = alloc(t.bytes().len())?;
            self.stream.upload(t.bytes(), &buf)?;
            ins.push(DeviceTensor {
                desc: t.desc(),
                ptr: buf.ptr(),
            });
            held.push(buf);
        }
        let mut outs = Vec::with_capacity(outputs.len());
        let mut out_bufs = Vec::with_capacity(outputs.len());
        for t in outputs.iter() {
            let buf = alloc(t.bytes().len())?;
            outs.push(DeviceTensor {
                desc: t.desc(),
                ptr: buf.ptr(),
            });
            out_bufs.push(buf);
        }
        if let Err(e) = self.device_kernel.execute(&ins, &outs, &self.stream) {
            return Ok(Err(e));
        }
        for (t, b) in outputs.iter_mut().zip(&out_bufs) {
            self.stream.download(b, t.bytes_mut())?;
        }
        Ok(Ok(()))
    }
}

impl Kernel for DeviceLayerKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        self.staged(inputs, outputs).map_err(|e| e.to_string())?
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
