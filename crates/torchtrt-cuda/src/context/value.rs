//! Where one tensor of a run lives: on the host, on the device, or both; and the context's
//! pool of device activation buffers.

use std::collections::BTreeMap;
use std::sync::Arc;

use torchtrt_core::Tensor;
use torchtrt_plugin_api::{DType, DeviceTensor, TensorDesc};

use crate::error::CudaResult;
use crate::memory::{CachingAllocator, DeviceBuffer};

/// A tensor's host copy.
pub(crate) enum Host<'a> {
    /// The caller's input.
    Borrowed(&'a Tensor),
    /// A constant, or a value cached across runs.
    Shared(Arc<Tensor>),
    /// Computed in this run.
    Owned(Tensor),
}

impl Host<'_> {
    pub(crate) fn get(&self) -> &Tensor {
        match self {
            Host::Borrowed(t) => t,
            Host::Shared(t) => t,
            Host::Owned(t) => t,
        }
    }
}

/// A tensor's device copy.
#[derive(Clone)]
pub(crate) enum Dev {
    /// Memory of the context (or of a constant), shared by views of it.
    Owned(Arc<DeviceBuffer>),
    /// A view `offset` bytes into memory of the context.
    Slice(Arc<DeviceBuffer>, usize),
    /// A caller's buffer.
    External(u64),
}

impl Dev {
    pub(crate) fn ptr(&self) -> u64 {
        match self {
            Dev::Owned(b) => b.ptr(),
            Dev::Slice(b, offset) => b.ptr() + *offset as u64,
            Dev::External(p) => *p,
        }
    }

    /// The same memory `bytes` further on.
    pub(crate) fn offset(&self, bytes: usize) -> Dev {
        match self {
            Dev::Owned(b) => Dev::Slice(b.clone(), bytes),
            Dev::Slice(b, offset) => Dev::Slice(b.clone(), offset + bytes),
            Dev::External(p) => Dev::External(p + bytes as u64),
        }
    }
}

/// One tensor of a run.
pub(crate) struct Value<'a> {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub host: Option<Host<'a>>,
    pub dev: Option<Dev>,
}

impl Value<'_> {
    pub(crate) fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }

    pub(crate) fn desc(&self) -> TensorDesc {
        TensorDesc::new(
            self.dtype,
            self.shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
    }

    /// The device view; `None` while the tensor is on the host only.
    pub(crate) fn device_tensor(&self) -> Option<DeviceTensor> {
        self.dev.as_ref().map(|d| DeviceTensor {
            desc: self.desc(),
            ptr: d.ptr(),
        })
    }
}

/// Device buffers freed during runs, kept by capacity for the context's next allocations.
/// Reuse is ordered by the stream the context queues on.
#[derive(Default)]
pub(crate) struct DevicePool {
    free: BTreeMap<usize, Vec<DeviceBuffer>>,
}

impl DevicePool {
    /// A buffer of at least `bytes` bytes: a kept one of the allocator's size class for
    /// `bytes`, else a new one.
    pub(crate) fn take(
        &mut self,
        allocator: &CachingAllocator,
        bytes: usize,
    ) -> CudaResult<DeviceBuffer> {
        let class = crate::memory::size_class(bytes);
        if let Some(b) = self.free.get_mut(&class).and_then(Vec::pop) {
            return Ok(b);
        }
        allocator.alloc(bytes)
    }

    /// Keeps `buffer` for reuse.
    pub(crate) fn put(&mut self, buffer: DeviceBuffer) {
        self.free.entry(buffer.capacity()).or_default().push(buffer);
    }

    /// Gives a device copy back: to the pool when no view shares it.
    pub(crate) fn release(&mut self, dev: Dev) {
        if let Dev::Owned(arc) | Dev::Slice(arc, _) = dev
            && let Ok(buffer) = Arc::try_unwrap(arc)
        {
            self.put(buffer);
        }
    }

    /// Bytes kept.
    pub(crate) fn held_bytes(&self) -> usize {
        self.free.iter().map(|(cap, v)| cap * v.len()).sum()
    }
}
