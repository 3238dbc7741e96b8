//! `enqueue` of a foreign plugin: host tensors and device tensors as a `TtrtLaunch`, with
//! every buffer checked against its description first.

use std::ffi::c_void;

use super::ForeignPlugin;
use crate::abi::cuda_runtime;
use crate::abi::desc;
use crate::abi::shape_values;
use crate::abi::types::{TtrtCudaRuntime, TtrtLaunch};
use crate::dtype::{DeviceKind, TensorDesc};
use crate::error::PluginResult;
use crate::plugin::{CpuLaunch, CudaLaunch};
use crate::shape_values::ShapeValues;

/// What a launch hands to the library, in host terms.
struct RawLaunch<'a> {
    device: DeviceKind,
    ordinal: i32,
    inputs: &'a [TensorDesc],
    outputs: &'a [TensorDesc],
    in_ptrs: &'a [*const c_void],
    out_ptrs: &'a [*mut c_void],
    workspace: *mut c_void,
    workspace_size: usize,
    stream: *mut c_void,
    cuda: *const TtrtCudaRuntime,
    threads: usize,
    values: Vec<ShapeValues>,
}

impl ForeignPlugin {
    /// Runs on host buffers, which must match their descriptions byte for byte.
    pub(super) fn enqueue_cpu(&self, c: CpuLaunch<'_, '_>) -> PluginResult<()> {
        let ins: Vec<TensorDesc> = c.inputs.iter().map(|t| t.desc.clone()).collect();
        let outs: Vec<TensorDesc> = c.outputs.iter().map(|t| t.desc.clone()).collect();
        let in_lens: Vec<usize> = c.inputs.iter().map(|t| t.data.len()).collect();
        let out_lens: Vec<usize> = c.outputs.iter().map(|t| t.data.len()).collect();
        self.check_tensors(&ins, &in_lens, "input")?;
        self.check_tensors(&outs, &out_lens, "output")?;
        let needed = self.query_workspace(&ins, &outs)?;
        if c.workspace.len() < needed {
            return Err(self.invalid(&format!(
                "workspace of {} bytes, the plugin needs {needed}",
                c.workspace.len()
            )));
        }
        let in_ptrs: Vec<*const c_void> = c.inputs.iter().map(|t| t.data.as_ptr().cast()).collect();
        let out_ptrs: Vec<*mut c_void> = c
            .outputs
            .iter_mut()
            .map(|t| t.data.as_mut_ptr().cast())
            .collect();
        let mut values = Vec::new();
        if !self.shape_inputs.is_empty() {
            values = vec![ShapeValues::Unknown; c.inputs.len()];
            for &i in &self.shape_inputs {
                if let (Some(v), Some(t)) = (values.get_mut(i), c.inputs.get(i)) {
                    *v = ShapeValues::from_bytes(t.desc.dtype, t.data)?;
                }
            }
        }
        self.launch(RawLaunch {
            device: DeviceKind::Cpu,
            ordinal: 0,
            inputs: &ins,
            outputs: &outs,
            in_ptrs: &in_ptrs,
            out_ptrs: &out_ptrs,
            workspace: c.workspace.as_mut_ptr().cast(),
            workspace_size: c.workspace.len(),
            stream: std::ptr::null_mut(),
            cuda: std::ptr::null(),
            threads: c.threads,
            values,
        })
    }

    /// Runs on device addresses, with the workspace size the plugin asks for.
    pub(super) fn enqueue_cuda(&self, c: &CudaLaunch<'_>) -> PluginResult<()> {
        let ins: Vec<TensorDesc> = c.inputs.iter().map(|t| t.desc.clone()).collect();
        let outs: Vec<TensorDesc> = c.outputs.iter().map(|t| t.desc.clone()).collect();
        let device_ptr = |p: u64| std::ptr::without_provenance_mut::<c_void>(p as usize);
        let in_ptrs: Vec<*const c_void> = c
            .inputs
            .iter()
            .map(|t| device_ptr(t.ptr).cast_const())
            .collect();
        let out_ptrs: Vec<*mut c_void> = c.outputs.iter().map(|t| device_ptr(t.ptr)).collect();
        let needed = self.query_workspace(&ins, &outs)?;
        let runtime = cuda_runtime::table(&c.runtime);
        self.launch(RawLaunch {
            device: DeviceKind::Cuda,
            ordinal: c.device,
            inputs: &ins,
            outputs: &outs,
            in_ptrs: &in_ptrs,
            out_ptrs: &out_ptrs,
            workspace: device_ptr(c.workspace),
            workspace_size: needed,
            stream: c.stream,
            cuda: &runtime,
            threads: 1,
            values: c.shape_values.to_vec(),
        })
    }

    fn check_tensors(&self, descs: &[TensorDesc], lens: &[usize], what: &str) -> PluginResult<()> {
        for (i, (d, &len)) in descs.iter().zip(lens).enumerate() {
            if d.byte_len() != Some(len) {
                return Err(self.invalid(&format!("{what} {i} is {d} but holds {len} bytes")));
            }
        }
        Ok(())
    }

    fn launch(&self, a: RawLaunch<'_>) -> PluginResult<()> {
        if a.outputs.len() != self.num_outputs {
            return Err(self.invalid(&format!(
                "{} outputs given, the plugin has {}",
                a.outputs.len(),
                self.num_outputs
            )));
        }
        let ins = desc::to_raw_all(a.inputs).map_err(|e| self.invalid(&e))?;
        let outs = desc::to_raw_all(a.outputs).map_err(|e| self.invalid(&e))?;
        if !a.values.is_empty() && a.values.len() != a.inputs.len() {
            return Err(self.invalid(&format!(
                "{} shape values for {} inputs",
                a.values.len(),
                a.inputs.len()
            )));
        }
        let raw_values = shape_values::to_raw(&a.values).map_err(|e| self.invalid(&e))?;
        let raw = TtrtLaunch {
            device: a.device as i32,
            device_ordinal: a.ordinal,
            nb_inputs: self.count(ins.len(), "inputs")?,
            nb_outputs: self.count(outs.len(), "outputs")?,
            input_descs: ins.as_ptr(),
            output_descs: outs.as_ptr(),
            inputs: a.in_ptrs.as_ptr(),
            outputs: a.out_ptrs.as_ptr(),
            workspace: a.workspace,
            workspace_size: a.workspace_size,
            stream: a.stream,
            threads: i32::try_from(a.threads.max(1)).unwrap_or(i32::MAX),
            reserved: 0,
            cuda: a.cuda,
            shape_values: if raw_values.is_empty() {
                std::ptr::null()
            } else {
                raw_values.as_ptr()
            },
        };
        // SAFETY: the table's function on its own `self`; `raw` describes live buffers.
        self.call(|err| unsafe { (self.fns.enqueue)(self.this, &raw, err) })
    }
}
