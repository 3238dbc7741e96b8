//! Runs a plugin layer on the CPU through `Plugin::enqueue`.

use std::sync::Arc;

use torchtrt_plugin_api::{CpuLaunch, HostTensor, HostTensorMut, Launch, Plugin, TensorDesc};

use crate::backend::Kernel;
use crate::layers::PluginLayer;
use crate::registry::guard_plugin;
use crate::tensor::Tensor;

pub(crate) struct PluginKernel {
    plugin: Arc<dyn Plugin>,
    threads: usize,
}

impl PluginKernel {
    /// The kernel of `layer`, whose CPU launches may use `threads` threads.
    pub fn new(layer: &PluginLayer, threads: usize) -> Result<PluginKernel, String> {
        Ok(PluginKernel {
            plugin: layer.plugin()?.clone(),
            threads: threads.max(1),
        })
    }

    /// The kernel of a live plugin, whose CPU launches may use `threads` threads.
    pub fn of(plugin: Arc<dyn Plugin>, threads: usize) -> PluginKernel {
        PluginKernel {
            plugin,
            threads: threads.max(1),
        }
    }
}

impl Kernel for PluginKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let in_descs: Vec<TensorDesc> = inputs.iter().map(|t| t.desc()).collect();
        let out_descs: Vec<TensorDesc> = outputs.iter().map(Tensor::desc).collect();
        let plugin = &self.plugin;
        copy_aliased(plugin.as_ref(), inputs, outputs)?;
        guard_plugin(|| {
            let mut workspace = vec![0u8; plugin.workspace_size(&in_descs, &out_descs)];
            let host_in: Vec<HostTensor<'_>> = inputs
                .iter()
                .zip(&in_descs)
                .map(|(t, d)| HostTensor {
                    desc: d.clone(),
                    data: t.bytes(),
                })
                .collect();
            let mut host_out: Vec<HostTensorMut<'_>> = outputs
                .iter_mut()
                .zip(&out_descs)
                .map(|(t, d)| HostTensorMut {
                    desc: d.clone(),
                    data: t.bytes_mut(),
                })
                .collect();
            plugin.enqueue(Launch::Cpu(CpuLaunch {
                inputs: &host_in,
                outputs: &mut host_out,
                workspace: &mut workspace,
                threads: self.threads,
            }))
        })
        .map_err(|e| e.to_string())
    }
}

/// Copies each aliased input into its output ([`Plugin::aliased_input`]) before a launch.
fn copy_aliased(
    plugin: &dyn Plugin,
    inputs: &[&Tensor],
    outputs: &mut [Tensor],
) -> Result<(), String> {
    for (j, out) in outputs.iter_mut().enumerate() {
        let Some(i) = guard_plugin(|| Ok(plugin.aliased_input(j))).unwrap_or(None) else {
            continue;
        };
        let src = inputs
            .get(i)
            .ok_or_else(|| format!("output {j} aliases input {i} of {}", inputs.len()))?;
        let dst = out.bytes_mut();
        if dst.len() != src.bytes().len() {
            return Err(format!(
                "output {j} aliases input {i} but holds {} bytes, the input {}",
                dst.len(),
                src.bytes().len()
            ));
        }
        dst.copy_from_slice(src.bytes());
    }
    Ok(())
}
