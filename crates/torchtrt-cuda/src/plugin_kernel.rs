//! Runs a plugin's CUDA kernel for the host-tensor runtime: inputs are copied to device
//! buffers from the caching allocator, the plugin is enqueued on the backend's stream, and
//! the outputs are copied back.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use torchtrt_core::backend::Kernel;
use torchtrt_core::tensor::Tensor;
use torchtrt_plugin_api::{CudaLaunch, DeviceTensor, Launch, Plugin, TensorDesc};

use crate::device::CudaDevice;
use crate::error::CudaResult;
use crate::memory::DeviceBuffer;
use crate::stream::Stream;

pub(crate) struct StagedPluginKernel {
    plugin: Arc<dyn Plugin>,
    device: CudaDevice,
    stream: Arc<Stream>,
}

impl StagedPluginKernel {
    pub(crate) fn new(
        plugin: Arc<dyn Plugin>,
        device: CudaDevice,
        stream: Arc<Stream>,
    ) -> StagedPluginKernel {
        StagedPluginKernel {
            plugin,
            device,
            stream,
        }
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

impl Kernel for StagedPluginKernel {
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
        let in_descs: Vec<TensorDesc> = inputs.iter().map(|t| t.desc()).collect();
        let out_descs: Vec<TensorDesc> = outputs.iter().map(Tensor::desc).collect();
        let dev_out: Vec<DeviceTensor> = out_descs
            .iter()
            .zip(&out_bufs)
            .map(|(d, b)| DeviceTensor {
                desc: d.clone(),
                ptr: b.ptr(),
            })
            .collect();
        let dev_in: Vec<DeviceTensor> = staged.iter().map(|(_, d)| d.clone()).collect();
        let work = self.plugin.workspace_size(&in_descs, &out_descs);
        let workspace = match work {
            0 => None,
            n => Some(
                self.device
                    .allocator()
                    .alloc(n)
                    .map_err(|e| e.to_string())?,
            ),
        };
        let launch = Launch::Cuda(CudaLaunch {
            inputs: &dev_in,
            outputs: &dev_out,
            workspace: workspace.as_ref().map_or(0, DeviceBuffer::ptr),
            device: self.device.ordinal() as i32,
            stream: self.stream.raw(),
        });
        catch_unwind(AssertUnwindSafe(|| self.plugin.enqueue(launch)))
            .map_err(|_| "the plugin panicked in enqueue".to_string())?
            .map_err(|e| e.to_string())?;
        for (t, b) in outputs.iter_mut().zip(&out_bufs) {
            self.stream
                .download(b, t.bytes_mut())
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
