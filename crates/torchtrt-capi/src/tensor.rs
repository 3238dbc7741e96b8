//! `TtrtTensor`: one input or output of an execution, as C callers describe it.

use std::ffi::{c_char, c_void};

use torchtrt_plugin_api::abi::TTRT_MAX_DIMS;
use torchtrt_plugin_api::{DType, DeviceKind};

use crate::engine::IoEntry;
use crate::error::CapiError;
use crate::ptr::c_str;

/// One input or output of `ttrt_context_execute` (see `torchtrt_runtime.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TtrtTensor {
    /// The engine tensor's name, or NULL to select by `index`.
    pub name: *const c_char,
    /// Input or output index, used when `name` is NULL.
    pub index: i32,
    /// A [`DType`] discriminant; must be the engine's.
    pub dtype: i32,
    /// A [`DeviceKind`] discriminant.
    pub device: i32,
    /// The CUDA device; 0 on the CPU.
    pub device_ordinal: i32,
    /// Rank (inputs), written for outputs.
    pub nb_dims: i32,
    /// Zero.
    pub reserved: i32,
    /// Shape (inputs), written for outputs.
    pub dims: [i64; TTRT_MAX_DIMS],
    /// The tensor's bytes.
    pub data: *mut c_void,
    /// Bytes at `data`.
    pub size: usize,
}

/// Which engine tensor `t` selects, checked: index in range, device supported (CUDA memory
/// only when `cuda`: the engine runs on a GPU), dtype the engine's. `kind` is `input` or `output`; `position` the tensor's place in the caller's
/// array.
///
/// # Safety
/// `t.name` is NULL or a NUL-terminated string.
pub(crate) unsafe fn resolve(
    t: &TtrtTensor,
    entries: &[IoEntry],
    kind: &str,
    position: usize,
    cuda: bool,
) -> Result<usize, CapiError> {
    let index = if t.name.is_null() {
        usize::try_from(t.index)
            .ok()
            .filter(|&i| i < entries.len())
            .ok_or_else(|| {
                CapiError::invalid(format!(
                    "{kind}s[{position}]: index {} is out of range (the engine has {} {kind}s)",
                    t.index,
                    entries.len()
                ))
            })?
    } else {
        let what = format!("{kind}s[{position}].name");
        // SAFETY: the caller's contract.
        let name = unsafe { c_str(t.name, &what) }?;
        entries.iter().position(|e| e.name == name).ok_or_else(|| {
            let known: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            CapiError::invalid(format!(
                "{kind}s[{position}]: the engine has no {kind} `{name}` ({kind}s: {})",
                known.join(", ")
            ))
        })?
    };
    let entry = &entries[index];
    match DeviceKind::from_raw(t.device) {
        Some(DeviceKind::Cpu) => {}
        Some(DeviceKind::Cuda) if cuda => {}
        Some(DeviceKind::Cuda) => {
            return Err(CapiError::unsupported(format!(
                "{kind} `{}` is in CUDA memory, but the engine runs on the CPU: pass host (TTRT_DEVICE_CPU) buffers",
                entry.name
            )));
        }
        None => {
            return Err(CapiError::invalid(format!(
                "{kind} `{}`: device {} is not a TtrtDevice",
                entry.name, t.device
            )));
        }
    }
    let dtype = DType::from_raw(t.dtype).ok_or_else(|| {
        CapiError::invalid(format!(
            "{kind} `{}`: dtype {} is not a TtrtDType",
            entry.name, t.dtype
        ))
    })?;
    if dtype != entry.dtype {
        return Err(CapiError::invalid(format!(
            "{kind} `{}` is {dtype}, the engine's is {}",
            entry.name, entry.dtype
        )));
    }
    Ok(index)
}
