//! The two array libraries an engine takes and returns: numpy and torch. Outputs are made
//! by the library of the first input (`numpy.empty` / `torch.empty` on the input's device),
//! so they are ordinary arrays the engine writes in place.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyTuple, PyType};
use torchtrt::plugin_api::DType;

use crate::dlpack::{self, Borrowed, Device};
use crate::error::msg;

/// Which library an array belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `numpy.ndarray`.
    Numpy,
    /// `torch.Tensor`.
    Torch,
}

struct Numpy {
    ndarray: Py<PyType>,
    empty: Py<PyAny>,
    dtypes: Vec<Option<Py<PyAny>>>,
}

struct Torch {
    tensor: Py<PyType>,
    parameter: Py<PyType>,
    empty: Py<PyAny>,
    /// `torch._C._to_dlpack_versioned` (or `_to_dlpack`): a tensor's capsule without the
    /// per-call stream objects `Tensor.__dlpack__` builds in Python.
    to_dlpack: Py<PyAny>,
    /// `torch._C._cuda_getCurrentRawStream`; `None` in a torch built without CUDA.
    raw_stream: Option<Py<PyAny>>,
    /// `None` for the dtypes this torch has no type for (u32 and u64 before torch 2.3).
    dtypes: Vec<Option<Py<PyAny>>>,
}

static NUMPY: PyOnceLock<Numpy> = PyOnceLock::new();
static TORCH: PyOnceLock<Torch> = PyOnceLock::new();

fn numpy(py: Python<'_>) -> PyResult<&Numpy> {
    NUMPY.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        let dtype = np.getattr("dtype")?;
        let dtypes = DType::ALL
            .iter()
            .map(|d| {
                numpy_dtype_name(*d)
                    .map(|n| dtype.call1((n,)).map(Bound::unbind))
                    .transpose()
            })
            .collect::<PyResult<_>>()?;
        Ok(Numpy {
            ndarray: np.getattr("ndarray")?.cast_into::<PyType>()?.unbind(),
            empty: np.getattr("empty")?.unbind(),
            dtypes,
        })
    })
}

fn torch(py: Python<'_>) -> PyResult<&Torch> {
    TORCH.get_or_try_init(py, || {
        let torch = py.import("torch")?;
        let dtypes = DType::ALL
            .iter()
            .map(|d| torch.getattr(torch_dtype_name(*d)).ok().map(Bound::unbind))
            .collect();
        let c = torch.getattr("_C")?;
        Ok(Torch {
            tensor: torch.getattr("Tensor")?.cast_into::<PyType>()?.unbind(),
            parameter: torch
                .getattr("nn")?
                .getattr("Parameter")?
                .cast_into::<PyType>()?
                .unbind(),
            empty: torch.getattr("empty")?.unbind(),
            to_dlpack: c
                .getattr("_to_dlpack_versioned")
                .or_else(|_| c.getattr("_to_dlpack"))?
                .unbind(),
            raw_stream: c
                .getattr("_cuda_getCurrentRawStream")
                .ok()
                .map(Bound::unbind),
            dtypes,
        })
    })
}

/// Whether torch has been imported by the process (then tensors may be passed).
fn torch_loaded(py: Python<'_>) -> bool {
    py.import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .and_then(|m| m.contains("torch"))
        .unwrap_or(false)
}

/// The library `obj` belongs to; `what` names it in the error for anything else.
pub fn kind_of(obj: &Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<Kind> {
    let py = obj.py();
    if obj.is_instance(numpy(py)?.ndarray.bind(py))? {
        return Ok(Kind::Numpy);
    }
    if (TORCH.get(py).is_some() || torch_loaded(py))
        && obj.is_instance(torch(py)?.tensor.bind(py))?
    {
        return Ok(Kind::Torch);
    }
    let ty = obj.get_type();
    Err(msg(format!(
        "{}: expected a numpy array or a torch tensor, got {}",
        what(),
        ty.fully_qualified_name()?
    )))
}

/// PyTorch's current CUDA stream of one call, looked up once (on the first CUDA array) and
/// then reused for its other arrays.
#[derive(Default)]
pub struct CallStream(Option<(i32, u64)>);

impl CallStream {
    /// PyTorch's current stream on CUDA device `device` as a native `CUstream` (null for the
    /// legacy default stream).
    pub fn of(&mut self, py: Python<'_>, device: i32) -> PyResult<u64> {
        if let Some((d, s)) = self.0
            && d == device
        {
            return Ok(s);
        }
        let f = torch(py)?
            .raw_stream
            .as_ref()
            .ok_or_else(|| msg("this torch has no CUDA support"))?;
        let s: u64 = f.bind(py).call1((device,))?.extract()?;
        self.0 = Some((device, s));
        Ok(s)
    }

    /// The stream looked up, if a CUDA array was seen.
    pub fn native(&self) -> Option<u64> {
        self.0.map(|(_, s)| s)
    }
}

/// Borrows the memory of `obj` (a numpy array or torch tensor; `what` names it in errors)
/// after `check` accepts its device, with the library it belongs to. Plain torch tensors
/// (`torch.Tensor`, `nn.Parameter`) are exported by `torch._C._to_dlpack`: the engine runs
/// on PyTorch's current stream, the one their producers were ordered on, so no stream
/// handshake is needed. Other arrays go through `__dlpack__`, CUDA ones with the current
/// stream as DLPack's consumer stream.
pub fn borrow(
    obj: &Bound<'_, PyAny>,
    stream: &mut CallStream,
    what: &dyn Fn() -> String,
    check: &dyn Fn(Device) -> PyResult<()>,
) -> PyResult<(Kind, Borrowed)> {
    let py = obj.py();
    let kind = kind_of(obj, what)?;
    let mut current = |n: i32| {
        stream
            .of(py, n)
            .map_err(|e| msg(format!("{}: PyTorch's current CUDA stream: {e}", what())))
    };
    let borrowed = match kind {
        Kind::Numpy => {
            check(Device::Cpu)?;
            Borrowed::new(obj, None, what)?
        }
        Kind::Torch => {
            let t = torch(py)?;
            let ty = obj.get_type();
            if ty.is(t.tensor.bind(py)) || ty.is(t.parameter.bind(py)) {
                let capsule =
                    t.to_dlpack.bind(py).call1((obj,)).map_err(|e| {
                        msg(format!("{}: the array cannot be shared ({e})", what()))
                    })?;
                let b = Borrowed::from_capsule(capsule, what)?;
                check(b.device)?;
                if let Device::Cuda(n) = b.device {
                    current(n)?;
                }
                b
            } else {
                let device = dlpack::device_of(obj, what)?;
                check(device)?;
                let consumer = match device {
                    Device::Cuda(n) => {
                        let s = current(n)?;
                        Some(if s == 0 { 1 } else { s as i64 })
                    }
                    _ => None,
                };
                Borrowed::new(obj, consumer, what)?
            }
        }
    };
    Ok((kind, borrowed))
}

/// A new uninitialised array of `kind` on `device` for an output named `name`.
pub fn empty<'py>(
    py: Python<'py>,
    kind: Kind,
    device: Device,
    dtype: DType,
    shape: &[usize],
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let dims = PyTuple::new(py, shape)?;
    match kind {
        Kind::Numpy => {
            let np = numpy(py)?;
            let Some(np_dtype) = &np.dtypes[dtype as usize] else {
                return Err(msg(format!(
                    "output `{name}` is {dtype}, which numpy has no type for: pass torch tensors"
                )));
            };
            np.empty.bind(py).call1((dims, np_dtype.bind(py)))
        }
        Kind::Torch => {
            let t = torch(py)?;
            let Some(torch_dtype) = &t.dtypes[dtype as usize] else {
                return Err(msg(format!(
                    "output `{name}` is {dtype}, which this torch has no type for: pass numpy arrays"
                )));
            };
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("dtype", torch_dtype.bind(py))?;
            kwargs.set_item("device", device.name())?;
            t.empty.bind(py).call((dims,), Some(&kwargs))
        }
    }
}

fn numpy_dtype_name(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::F64 => "float64",
        DType::I64 => "int64",
        DType::I32 => "int32",
        DType::I16 => "int16",
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        DType::BF16 => return None,
    })
}

fn torch_dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F64 => "float64",
        DType::I64 => "int64",
        DType::I32 => "int32",
        DType::I16 => "int16",
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
    }
}
