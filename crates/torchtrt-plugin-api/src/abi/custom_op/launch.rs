//! Launches of custom-op kernels: a `TtrtLaunch` as host or device tensors (library side),
//! and host or device tensors as a `TtrtLaunch` (host side).

use std::ffi::c_void;

use super::invalid;
use crate::abi::cuda_runtime;
use crate::abi::desc;
use crate::abi::export_plugin::launch::with_launch;
use crate::abi::ptr;
use crate::abi::types::{TtrtCudaRuntime, TtrtLaunch};
use crate::dtype::{DeviceKind, TensorDesc};
use crate::error::PluginResult;
use crate::plugin::{CpuLaunch, CudaLaunch, Launch};

/// Calls `f` with the tensors `l` describes.
///
/// # Safety
/// `l` is NULL or valid, and every pointer in it holds what its count and description say;
/// outputs and workspace overlap nothing else.
pub(super) unsafe fn run(
    l: *const TtrtLaunch,
    f: impl FnOnce(Launch<'_, '_>) -> PluginResult<()>,
) -> PluginResult<()> {
    // SAFETY: by the caller's promise.
    let l = unsafe { l.as_ref() }.ok_or_else(|| invalid("launch is NULL".into()))?;
    // SAFETY: by the caller's promise.
    unsafe { with_launch(l, f) }
}

/// A launch in host terms.
struct Parts<'a> {
    device: DeviceKind,
    ordinal: i32,
    ins: &'a [TensorDesc],
    outs: &'a [TensorDesc],
    in_ptrs: &'a [*const c_void],
    out_ptrs: &'a [*mut c_void],
    workspace: (*mut c_void, usize),
    stream: *mut c_void,
    cuda: *const TtrtCudaRuntime,
    threads: usize,
}

fn raw_launch(p: Parts<'_>, f: impl FnOnce(&TtrtLaunch) -> PluginResult<()>) -> PluginResult<()> {
    let ri = desc::to_raw_all(p.ins).map_err(invalid)?;
    let ro = desc::to_raw_all(p.outs).map_err(invalid)?;
    let raw = TtrtLaunch {
        device: p.device as i32,
        device_ordinal: p.ordinal,
        nb_inputs: ptr::to_count(ri.len(), "inputs").map_err(invalid)?,
        nb_outputs: ptr::to_count(ro.len(), "outputs").map_err(invalid)?,
        input_descs: ri.as_ptr(),
        output_descs: ro.as_ptr(),
        inputs: p.in_ptrs.as_ptr(),
        outputs: p.out_ptrs.as_ptr(),
        workspace: p.workspace.0,
        workspace_size: p.workspace.1,
        stream: p.stream,
        threads: i32::try_from(p.threads.max(1)).unwrap_or(i32::MAX),
        reserved: 0,
        cuda: p.cuda,
        shape_values: std::ptr::null(),
    };
    f(&raw)
}

/// Calls `f` with the C form of a CPU launch, every buffer checked against its description.
pub(super) fn cpu(
    c: CpuLaunch<'_, '_>,
    f: impl FnOnce(&TtrtLaunch) -> PluginResult<()>,
) -> PluginResult<()> {
    let ins: Vec<TensorDesc> = c.inputs.iter().map(|t| t.desc.clone()).collect();
    let outs: Vec<TensorDesc> = c.outputs.iter().map(|t| t.desc.clone()).collect();
    for t in c.inputs {
        if t.desc.byte_len() != Some(t.data.len()) {
            return Err(invalid(format!(
                "input {} holds {} bytes",
                t.desc,
                t.data.len()
            )));
        }
    }
    for t in c.outputs.iter() {
        if t.desc.byte_len() != Some(t.data.len()) {
            return Err(invalid(format!(
                "output {} holds {} bytes",
                t.desc,
                t.data.len()
            )));
        }
    }
    let in_ptrs: Vec<*const c_void> = c.inputs.iter().map(|t| t.data.as_ptr().cast()).collect();
    let out_ptrs: Vec<*mut c_void> = c
        .outputs
        .iter_mut()
        .map(|t| t.data.as_mut_ptr().cast())
        .collect();
    let ws = (c.workspace.as_mut_ptr().cast(), c.workspace.len());
    raw_launch(
        Parts {
            device: DeviceKind::Cpu,
            ordinal: 0,
            ins: &ins,
            outs: &outs,
            in_ptrs: &in_ptrs,
            out_ptrs: &out_ptrs,
            workspace: ws,
            stream: std::ptr::null_mut(),
            cuda: std::ptr::null(),
            threads: c.threads,
        },
        f,
    )
}

/// Calls `f` with the C form of a CUDA launch.
pub(super) fn cuda(
    c: &CudaLaunch<'_>,
    f: impl FnOnce(&TtrtLaunch) -> PluginResult<()>,
) -> PluginResult<()> {
    let ins: Vec<TensorDesc> = c.inputs.iter().map(|t| t.desc.clone()).collect();
    let outs: Vec<TensorDesc> = c.outputs.iter().map(|t| t.desc.clone()).collect();
    let dev = |p: u64| std::ptr::without_provenance_mut::<c_void>(p as usize);
    let in_ptrs: Vec<*const c_void> = c.inputs.iter().map(|t| dev(t.ptr).cast_const()).collect();
    let out_ptrs: Vec<*mut c_void> = c.outputs.iter().map(|t| dev(t.ptr)).collect();
    let runtime = cuda_runtime::table(&c.runtime);
    raw_launch(
        Parts {
            device: DeviceKind::Cuda,
            ordinal: c.device,
            ins: &ins,
            outs: &outs,
            in_ptrs: &in_ptrs,
            out_ptrs: &out_ptrs,
            workspace: (dev(c.workspace), 0),
            stream: c.stream,
            cuda: &runtime,
            threads: 1,
        },
        f,
    )
}
