//! A run's inputs and outputs: the caller's tensors of `execute`, or the buffers bound by
//! name (TensorRT's `setTensorAddress`, onnxruntime's `IoBinding`).

use torchtrt_plugin_api::DType;

use crate::error::{Error, Result};
use crate::tensor::{AlignedBuf, Tensor};

/// Where a caller's buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// Host memory.
    Host,
    /// Memory of the engine's device (a `CUdeviceptr` for CUDA).
    Device,
}

/// A caller's buffer for one engine input or output: where it is, its address, and the
/// dtype and shape of the dense row-major tensor it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoBuffer {
    /// Host or device memory.
    pub memory: MemoryKind,
    /// The address.
    pub ptr: u64,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
}

impl IoBuffer {
    /// A buffer on the engine's device.
    pub fn device(ptr: u64, dtype: DType, shape: &[usize]) -> IoBuffer {
        IoBuffer {
            memory: MemoryKind::Device,
            ptr,
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// A buffer in host memory.
    pub fn host(ptr: *mut u8, dtype: DType, shape: &[usize]) -> IoBuffer {
        IoBuffer {
            memory: MemoryKind::Host,
            ptr: ptr as u64,
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// Bytes of the tensor; `Err` when the size overflows.
    pub fn bytes(&self) -> Result<usize> {
        self.shape
            .iter()
            .try_fold(self.dtype.size(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| Error::Input(format!("a buffer of shape {:?} overflows", self.shape)))
    }
}

/// An input bound to the context.
pub(crate) enum InputBinding {
    /// Not bound.
    None,
    /// Host memory: a view of it, or (`staged`: its address) a copy refreshed every run
    /// because the memory is not aligned for in-place use.
    Host { tensor: Tensor, staged: Option<u64> },
    /// Device memory.
    Device {
        ptr: u64,
        dtype: DType,
        shape: Vec<usize>,
    },
}

/// Where a run leaves one output.
pub(crate) enum OutputTarget {
    /// Returned to the caller as a tensor of its own (filled at the end of the run).
    Return(Option<Tensor>),
    /// A bound host buffer (lent to the layer writing it during a run), with the address
    /// to copy it to after each run when it is staged.
    Host {
        tensor: Option<Tensor>,
        staged: Option<u64>,
    },
    /// Left where the walk computed it (a recorded run reads it from there).
    Keep,
    /// A bound device buffer.
    Device {
        ptr: u64,
        dtype: DType,
        shape: Vec<usize>,
    },
}

impl OutputTarget {
    /// The dtype and shape the target was bound with; `None` for returned outputs.
    pub(crate) fn meta(&self) -> Option<(DType, &[usize])> {
        match self {
            OutputTarget::Return(_) | OutputTarget::Keep => None,
            OutputTarget::Host { tensor, .. } => tensor.as_ref().map(|t| (t.dtype(), t.shape())),
            OutputTarget::Device { dtype, shape, .. } => Some((*dtype, shape)),
        }
    }
}

/// The inputs of one run, by engine input index.
pub(crate) trait RunInputs: Sync {
    /// The dtype and shape of input `k`.
    fn meta(&self, k: usize) -> (DType, &[usize]);
    /// Input `k` in host memory, if it is there.
    fn host(&self, k: usize) -> Option<&Tensor>;
    /// Input `k`'s device address, if it is on the device.
    fn device(&self, k: usize) -> Option<u64>;
}

impl RunInputs for [&Tensor] {
    fn meta(&self, k: usize) -> (DType, &[usize]) {
        (self[k].dtype(), self[k].shape())
    }

    fn host(&self, k: usize) -> Option<&Tensor> {
        Some(self[k])
    }

    fn device(&self, _k: usize) -> Option<u64> {
        None
    }
}

impl RunInputs for [InputBinding] {
    fn meta(&self, k: usize) -> (DType, &[usize]) {
        match &self[k] {
            InputBinding::Host { tensor, .. } => (tensor.dtype(), tensor.shape()),
            InputBinding::Device { dtype, shape, .. } => (*dtype, shape),
            InputBinding::None => (DType::F32, &[]),
        }
    }

    fn host(&self, k: usize) -> Option<&Tensor> {
        match &self[k] {
            InputBinding::Host { tensor, .. } => Some(tensor),
            _ => None,
        }
    }

    fn device(&self, k: usize) -> Option<u64> {
        match &self[k] {
            InputBinding::Device { ptr, .. } => Some(*ptr),
            _ => None,
        }
    }
}

/// A host tensor over a caller's memory: a view when `ptr` is aligned for in-place use,
/// else a copy (`staged` is then `Some(ptr)`). `ptr` may be null only for an empty tensor.
///
/// # Safety
/// `ptr` must be valid for reads and writes of the tensor's bytes, from any thread, until
/// the binding is replaced or the context dropped.
pub(crate) unsafe fn host_view(
    ptr: u64,
    dtype: DType,
    shape: &[usize],
    bytes: usize,
) -> Result<(Tensor, Option<u64>)> {
    if ptr == 0 && bytes > 0 {
        return Err(Error::Input("the buffer's address is null".into()));
    }
    // SAFETY: per this function's contract.
    let view = unsafe { AlignedBuf::external(ptr as *mut u8, bytes) };
    match view {
        Some(buf) => Ok((
            Tensor::over(dtype, shape, buf).unwrap_or_else(|| Tensor::zeros(dtype, shape)),
            None,
        )),
        None => Ok((Tensor::zeros(dtype, shape), Some(ptr))),
    }
}
