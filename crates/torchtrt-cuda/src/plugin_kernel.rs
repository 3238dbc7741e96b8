//! A plugin layer placed on CUDA: its plugin enqueued on the context's current stream over
//! device tensors, with its workspace from the context's memory and the backend's CUDA
//! runtime for its kernels.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use torchtrt_core::backend::{DeviceContext, Kernel, Placement};
use torchtrt_core::tensor::Tensor;
use torchtrt_plugin_api::{CudaLaunch, DeviceTensor, Launch, Plugin, ShapeValues, TensorDesc};

use crate::context::CudaDeviceContext;
use crate::plugin_runtime::{PluginLauncher, PluginPrograms};

pub(crate) struct DevicePluginKernel {
    plugin: Arc<dyn Plugin>,
    ordinal: i32,
    launcher: PluginLauncher,
}

impl DevicePluginKernel {
    pub(crate) fn new(
        plugin: Arc<dyn Plugin>,
        ordinal: usize,
        programs: &Arc<PluginPrograms>,
    ) -> DevicePluginKernel {
        DevicePluginKernel {
            plugin,
            ordinal: ordinal as i32,
            launcher: programs.launcher(),
        }
    }

    /// Bytes of device scratch the plugin needs for these tensors.
    fn workspace_size(&self, inputs: &[DeviceTensor], outputs: &[DeviceTensor]) -> usize {
        let ins: Vec<TensorDesc> = inputs.iter().map(|t| t.desc.clone()).collect();
        let outs: Vec<TensorDesc> = outputs.iter().map(|t| t.desc.clone()).collect();
        catch_unwind(AssertUnwindSafe(|| self.plugin.workspace_size(&ins, &outs))).unwrap_or(0)
    }
}

impl Kernel for DevicePluginKernel {
    fn execute(&self, _inputs: &[&Tensor], _outputs: &mut [Tensor]) -> Result<(), String> {
        Err("this plugin layer runs on the CUDA device".into())
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
        self.launch(inputs, &[], outputs, device)
    }

    fn enqueue_with_values(
        &self,
        inputs: &[DeviceTensor],
        values: &[Option<&Tensor>],
        outputs: &[DeviceTensor],
        device: &mut dyn DeviceContext,
    ) -> Result<(), String> {
        let shape_values = values
            .iter()
            .map(|v| match v {
                Some(t) => ShapeValues::from_bytes(t.dtype(), t.bytes()),
                None => Ok(ShapeValues::Unknown),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        self.launch(inputs, &shape_values, outputs, device)
    }
}

impl DevicePluginKernel {
    /// Enqueues the plugin on the context's current stream.
    fn launch(
        &self,
        inputs: &[DeviceTensor],
        shape_values: &[ShapeValues],
        outputs: &[DeviceTensor],
        device: &mut dyn DeviceContext,
    ) -> Result<(), String> {
        for (j, out) in outputs.iter().enumerate() {
            let Some(i) =
                catch_unwind(AssertUnwindSafe(|| self.plugin.aliased_input(j))).unwrap_or(None)
            else {
                continue;
            };
            let src = inputs
                .get(i)
                .ok_or_else(|| format!("output {j} aliases input {i} of {}", inputs.len()))?;
            let bytes = src.desc.byte_len().unwrap_or(0);
            if out.desc.byte_len() != Some(bytes) {
                return Err(format!(
                    "output {j} aliases input {i} but its size differs ({} vs {})",
                    out.desc, src.desc
                ));
            }
            // SAFETY: both are device tensors of `bytes` bytes the walk allocated for this
            // layer; the copy is queued on the context's stream before the launch.
            unsafe { device.copy(src.ptr, out.ptr, bytes)? };
        }
        let workspace = match self.workspace_size(inputs, outputs) {
            0 => None,
            n => Some(device.alloc(n)?),
        };
        let ran = CudaDeviceContext::of(device).and_then(|context| {
            let stream = context.current_stream();
            let runtime = self.launcher.on(stream);
            let launch = Launch::Cuda(CudaLaunch {
                inputs,
                outputs,
                workspace: workspace.as_ref().map_or(0, |w| w.ptr),
                device: self.ordinal,
                stream: stream.raw(),
                runtime: &runtime,
                shape_values,
            });
            catch_unwind(AssertUnwindSafe(|| self.plugin.enqueue(launch)))
                .map_err(|_| "the plugin panicked in enqueue".to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
        });
        if let Some(w) = workspace {
            device.release(w);
        }
        ran
    }
}
