//! Borrowing an array's memory through DLPack: `obj.__dlpack__()` hands out a capsule
//! holding a `DLManagedTensor` (or, DLPack 1.0, a `DLManagedTensorVersioned`); the capsule
//! is kept alive while the engine uses the memory and its own destructor releases it.

use std::ffi::{CStr, c_void};

use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use torchtrt::plugin_api::DType;

use crate::error::msg;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const FLAG_READ_ONLY: u64 = 1;

/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// `kDLCUDAHost` (pinned host memory, addressable from the host).
pub const DEVICE_CUDA_HOST: i32 = 3;

/// Where an array lives, as DLPack names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// Host memory (pageable or pinned).
    Cpu,
    /// CUDA device memory of this ordinal.
    Cuda(i32),
    /// Anything else (`kDL…` device type, id).
    Other(i32, i32),
}

impl Device {
    fn from_dl(device_type: i32, device_id: i32) -> Device {
        match device_type {
            DEVICE_CPU | DEVICE_CUDA_HOST => Device::Cpu,
            DEVICE_CUDA => Device::Cuda(device_id),
            t => Device::Other(t, device_id),
        }
    }

    /// `cpu`, `cuda:N`, or the DLPack device type.
    pub fn name(self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Cuda(n) => format!("cuda:{n}"),
            Device::Other(t, n) => format!("DLPack device type {t} (id {n})"),
        }
    }
}

/// The device an object's `__dlpack_device__()` reports (`what` names it in errors).
pub fn device_of(obj: &Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<Device> {
    let (t, id): (i32, i32) = obj
        .call_method0(pyo3::intern!(obj.py(), "__dlpack_device__"))
        .and_then(|d| d.extract())
        .map_err(|e| msg(format!("{}: its device cannot be shared ({e})", what())))?;
    Ok(Device::from_dl(t, id))
}

/// An array's memory, borrowed for as long as this lives.
pub struct Borrowed {
    _capsule: Py<PyAny>,
    /// Where the memory is.
    pub device: Device,
    /// The first element's address.
    pub ptr: u64,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
}

impl Borrowed {
    /// Borrows `obj`'s memory; `stream` is the CUDA stream the memory will be used on
    /// (DLPack's consumer stream) for device arrays, `None` for host arrays. `what` names
    /// the array in errors (`input \`x\``). Refuses dtypes torchtrt has no name for and
    /// strided (non-contiguous) layouts.
    pub fn new(
        obj: &Bound<'_, PyAny>,
        stream: Option<i64>,
        what: &dyn Fn() -> String,
    ) -> PyResult<Borrowed> {
        let py = obj.py();
        let kwargs = PyDict::new(py);
        if let Some(s) = stream {
            kwargs.set_item("stream", s)?;
        }
        kwargs.set_item("max_version", (1, 0))?;
        let method = obj
            .getattr(pyo3::intern!(py, "__dlpack__"))
            .map_err(|_| msg(format!("{}: the array does not support DLPack", what())))?;
        let capsule = match method.call((), Some(&kwargs)) {
            Ok(c) => c,
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(py) => {
                kwargs.del_item("max_version")?;
                method
                    .call((), Some(&kwargs))
                    .map_err(|e| msg(format!("{}: the array cannot be shared ({e})", what())))?
            }
            Err(e) => {
                return Err(msg(format!("{}: the array cannot be shared ({e})", what())));
            }
        };
        Borrowed::from_capsule(capsule, what)
    }

    /// Borrows the memory a DLPack capsule (legacy or versioned, not yet consumed) describes;
    /// the capsule is kept alive with it.
    pub fn from_capsule(
        capsule: Bound<'_, PyAny>,
        what: &dyn Fn() -> String,
    ) -> PyResult<Borrowed> {
        let cap = capsule
            .cast::<PyCapsule>()
            .map_err(|_| msg(format!("{}: __dlpack__ did not return a capsule", what())))?;
        let (tensor, _read_only) = if let Ok(p) = cap.pointer_checked(Some(VERSIONED)) {
            // SAFETY: a `dltensor_versioned` capsule holds a live `DLManagedTensorVersioned`.
            let m = unsafe { &*(p.as_ptr() as *const DLManagedTensorVersioned) };
            if m.version[0] != 1 {
                return Err(msg(format!(
                    "{}: DLPack {}.{} is not supported (1.x is)",
                    what(),
                    m.version[0],
                    m.version[1]
                )));
            }
            (
                &m.dl_tensor as *const DLTensor,
                m.flags & FLAG_READ_ONLY != 0,
            )
        } else if let Ok(p) = cap.pointer_checked(Some(LEGACY)) {
            // SAFETY: a `dltensor` capsule holds a live `DLManagedTensor`.
            let m = unsafe { &*(p.as_ptr() as *const DLManagedTensor) };
            (&m.dl_tensor as *const DLTensor, false)
        } else {
            return Err(msg(format!(
                "{}: __dlpack__ returned a capsule already used or of another kind",
                what(),
            )));
        };
        // SAFETY: the capsule (kept below) owns the tensor description.
        let t = unsafe { &*tensor };
        let device = Device::from_dl(t.device.device_type, t.device.device_id);
        let dtype = dtype_of(t.dtype).ok_or_else(|| {
            msg(format!(
                "{}: DLPack dtype (code {}, {} bits, {} lanes) has no torchtrt dtype",
                what(),
                t.dtype.code,
                t.dtype.bits,
                t.dtype.lanes
            ))
        })?;
        let ndim =
            usize::try_from(t.ndim).map_err(|_| msg(format!("{}: negative rank", what())))?;
        let dims: &[i64] = if ndim == 0 || t.shape.is_null() {
            &[]
        } else {
            // SAFETY: DLPack: `shape` holds `ndim` entries.
            unsafe { std::slice::from_raw_parts(t.shape, ndim) }
        };
        let shape: Vec<usize> = dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| msg(format!("{}: negative dim {d}", what()))))
            .collect::<PyResult<_>>()?;
        if !t.strides.is_null() && ndim > 0 {
            // SAFETY: DLPack: non-null `strides` holds `ndim` entries.
            let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
            if !row_major(&shape, strides) {
                return Err(msg(format!(
                    "{} is not contiguous (shape {shape:?}, strides {strides:?}): pass a contiguous copy (`.contiguous()`, `numpy.ascontiguousarray`)",
                    what(),
                )));
            }
        }
        let ptr = (t.data as u64)
            .checked_add(t.byte_offset)
            .ok_or_else(|| msg(format!("{}: address overflows", what())))?;
        Ok(Borrowed {
            _capsule: capsule.unbind(),
            device,
            ptr,
            dtype,
            shape,
        })
    }
}

/// Whether `strides` (in elements) are those of a dense row-major tensor of `shape`
/// (dims of size 1 may have any stride; an empty tensor is always dense).
fn row_major(shape: &[usize], strides: &[i64]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expect: i64 = 1;
    for (&d, &s) in shape.iter().zip(strides).rev() {
        if d != 1 && s != expect {
            return false;
        }
        expect = expect.saturating_mul(d as i64);
    }
    true
}

fn dtype_of(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    Some(match (t.code, t.bits) {
        (2, 32) => DType::F32,
        (2, 16) => DType::F16,
        (2, 64) => DType::F64,
        (4, 16) => DType::BF16,
        (0, 64) => DType::I64,
        (0, 32) => DType::I32,
        (0, 16) => DType::I16,
        (0, 8) => DType::I8,
        (1, 8) => DType::U8,
        (1, 16) => DType::U16,
        (1, 32) => DType::U32,
        (1, 64) => DType::U64,
        (6, 8) => DType::Bool,
        _ => return None,
    })
}
