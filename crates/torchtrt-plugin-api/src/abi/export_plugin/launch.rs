//! A `TtrtLaunch` as host tensors or device tensors, each buffer checked against its
//! description: the library side of an exported plugin's `enqueue` and a custom op's
//! kernels.

use super::{descs, invalid};
use crate::abi::cuda_runtime::ForeignCudaRuntime;
use crate::abi::ptr;
use crate::abi::shape_values;
use crate::abi::types::TtrtLaunch;
use crate::dtype::{DeviceKind, TensorDesc};
use crate::error::PluginResult;
use crate::plugin::{CpuLaunch, CudaLaunch, DeviceTensor, HostTensor, HostTensorMut, Launch};

/// Calls `f` with the tensors `l` describes.
///
/// # Safety
/// Every pointer in `l` holds what its count and description say; outputs and workspace
/// overlap nothing else.
pub(in crate::abi) unsafe fn with_launch(
    l: &TtrtLaunch,
    f: impl FnOnce(Launch<'_, '_>) -> PluginResult<()>,
) -> PluginResult<()> {
    // SAFETY: forwarded from the caller.
    let (ins, outs) = unsafe { descs(l.input_descs, l.nb_inputs, l.output_descs, l.nb_outputs) }?;
    // SAFETY: one pointer per input.
    let in_ptrs = unsafe { ptr::slice(l.inputs, ins.len(), "input pointers") }.map_err(invalid)?;
    // SAFETY: one pointer per output.
    let out_ptrs =
        unsafe { ptr::slice(l.outputs, outs.len(), "output pointers") }.map_err(invalid)?;
    match DeviceKind::from_raw(l.device) {
        Some(DeviceKind::Cpu) => {
            let bytes = |d: &TensorDesc| {
                d.byte_len()
                    .ok_or_else(|| invalid(format!("tensor {d} has no concrete size")))
            };
            let mut inputs = Vec::with_capacity(ins.len());
            for (desc, &p) in ins.into_iter().zip(in_ptrs) {
                // SAFETY: the input holds its description's bytes.
                let data = unsafe { ptr::slice(p.cast::<u8>(), bytes(&desc)?, "input") }
                    .map_err(invalid)?;
                inputs.push(HostTensor { desc, data });
            }
            let mut outputs = Vec::with_capacity(outs.len());
            for (desc, &p) in outs.into_iter().zip(out_ptrs) {
                // SAFETY: the output holds its description's bytes and overlaps nothing.
                let data = unsafe { ptr::slice_mut(p.cast::<u8>(), bytes(&desc)?, "output") }
                    .map_err(invalid)?;
                outputs.push(HostTensorMut { desc, data });
            }
            // SAFETY: the workspace holds `workspace_size` bytes and overlaps nothing.
            let workspace =
                unsafe { ptr::slice_mut(l.workspace.cast::<u8>(), l.workspace_size, "workspace") }
                    .map_err(invalid)?;
            f(Launch::Cpu(CpuLaunch {
                inputs: &inputs,
                outputs: &mut outputs,
                workspace,
                threads: usize::try_from(l.threads).unwrap_or(1).max(1),
            }))
        }
        Some(DeviceKind::Cuda) => {
            let device = |(desc, p): (TensorDesc, usize)| DeviceTensor {
                desc,
                ptr: p as u64,
            };
            let inputs: Vec<_> = ins
                .into_iter()
                .zip(in_ptrs.iter().map(|p| p.addr()))
                .map(device)
                .collect();
            let outputs: Vec<_> = outs
                .into_iter()
                .zip(out_ptrs.iter().map(|p| p.addr()))
                .map(device)
                .collect();
            // SAFETY: NULL or the host's table, valid for this call.
            let runtime = unsafe { ForeignCudaRuntime::new(l.cuda) };
            let shape_values = if l.shape_values.is_null() {
                Vec::new()
            } else {
                // SAFETY: one entry per input by the ABI's rules.
                unsafe { shape_values::from_raw(l.shape_values, inputs.len()) }.map_err(invalid)?
            };
            f(Launch::Cuda(CudaLaunch {
                inputs: &inputs,
                outputs: &outputs,
                workspace: l.workspace.addr() as u64,
                device: l.device_ordinal,
                stream: l.stream,
                runtime: &runtime,
                shape_values: &shape_values,
            }))
        }
        None => Err(invalid(format!("unknown device kind {}", l.device))),
    }
}
