//! A plugin layer placed on CUDA: its plugin enqueued on a stream over device tensors. The
//! device-resident context calls [`DevicePluginKernel::enqueue`] directly; the host-tensor
//! runtime goes through [`Kernel::execute`], which stages: inputs are copied to device
//! buffers from the caching allocator, the plugin runs on the backend's stream, and the
//! outputs are copied back.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use torchtrt_core::backend::Kernel;
use torchtrt_core::tensor::Tensor;
use torchtrt_plugin_api::{CudaLaunch, DeviceTensor, Launch, Plugin, TensorDesc};

use crate::device::CudaDevice;
use crate::error::CudaResult;
use crate::memory::DeviceBuffer;
use crate::stream::Stream;

pub(crate) struct DevicePluginKernel {
    plugin: Arc<dyn Plugin>,
    device: CudaDevice,
    stream: Arc<Stream>,
}

impl DevicePluginKernel {
    pub(crate) fn new(
        plugin: Arc<dyn Plugin>,
        device: CudaDevice,
        stream: Arc<Stream>,
    ) -> DevicePluginKernel {
        DevicePluginKernel {
            plugin,
            device,
            stream,
        }
    }

    /// Bytes of device scratch the plugin needs for these tensors.
    pub(crate) fn workspace_size(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
    ) -> usize {
        let ins: Vec<TensorDesc> = inputs.iter().map(|t| t.desc.clone()).collect();
        let outs: Vec<TensorDesc> = outputs.iter().map(|t| t.desc.clone()).collect();
        catch_unwind(AssertUnwindSafe(|| self.plugin.workspace_size(&ins, &outs))).unwrap_or(0)
    }

    /// Queues the plugin on `stream` over device tensors, with `workspace` (a device
    /// address of at least [`Self::workspace_size`] bytes, or 0 when none is needed).
    pub(crate) fn enqueue(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        workspace: u64,
        stream: &Stream,
    ) -> Result<(), String> {
        let launch = Launch::Cuda(CudaLaunch {
            inputs,
            outputs,
            workspace,
            device: self.device.ordinal() as i32,
            stream: stream.raw(),
        });
        catch_unwind(AssertUnwindSafe(|| self.plugin.enqueue(launch)))
            .map_err(|_| "the plugin panicked in enqueue".to_string())?
            .map_err(|e| e.to_string())
    }

    fn upload(&self, t: &Tensor) -> CudaResult<(DeviceBuffer, DeviceTensor)> {
        let buf = self.device.allocator().alloc(t.bytes().len())?;
        self.stream.upload(t.bytes(), &buf)?;
        let dt = DeviceTensor {
            desc: t.desc(),
            ptr: buf.ptr(),
        };
        Ok((buf, dt))
    }
}

impl Kernel for DevicePluginKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let staged = inputs
            .iter()
            .map(|t| self.upload(t))
            .collect::<CudaResult<Vec<_>>>()
            .map_err(|e| e.to_string())?;
        let out_bufs = outputs
            .iter()
            .map(|t| self.device.allocator().alloc(t.bytes().len()))
            .collect::<CudaResult<Vec<_>>>()
            .map_err(|e| e.to_string())?;
        let dev_out: Vec<DeviceTensor> = outputs
            .iter()
            .zip(&out_bufs)
            .map(|(t, b)| DeviceTensor {
                desc: t.desc(),
                ptr: b.ptr(),
            })
            .collect();
        let dev_in: Vec<DeviceTensor> = staged.iter().map(|(_, d)| d.clone()).collect();
        let workspace = match self.workspace_size(&dev_in, &dev_out) {
            0 => None,
            n => Some(
                self.device
                    .allocator()
                    .alloc(n)
                    .map_err(|e| e.to_string())?,
            ),
        };
        self.enqueue(
            &dev_in,
            &dev_out,
            workspace.as_ref().map_or(0, DeviceBuffer::ptr),
            &self.stream,
        )?;
        for (t, b) in outputs.iter_mut().zip(&out_bufs) {
            self.stream
                .download(b, t.bytes_mut())
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
