//! Where one tensor of a run lives — on the host, on the device, or both — and the pools
//! and tables a context keeps so that repeated runs allocate nothing.

use std::sync::Arc;

use torchtrt_plugin_api::{DType, DeviceTensor, TensorDesc};

use crate::backend::{DeviceContext, DeviceMemory};
use crate::tensor::Tensor;

/// A tensor's dtype and concrete shape.
pub(crate) type Meta = (DType, Vec<usize>);

/// A tensor's dtype, concrete shape and, when known, value.
pub(crate) type Known = (DType, Vec<usize>, Option<Arc<Tensor>>);

/// A tensor's host copy.
pub(crate) enum Host {
    /// None (yet).
    None,
    /// The run's input `k` (the caller's tensor or bound memory).
    Input(usize),
    /// The bound host buffer of output `k`, written in place.
    Bound(usize),
    /// A constant, or a value kept across runs.
    Shared(Arc<Tensor>),
    /// Computed in this run, from the context's pool.
    Owned(Tensor),
}

/// A tensor's device copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dev {
    /// None (yet).
    None,
    /// Entry `index` of the run's device table, `offset` bytes in.
    Run { index: usize, offset: usize },
    /// Memory the context keeps across runs (constants, values derived from them).
    Kept(u64),
    /// A caller's memory.
    External(u64),
}

/// One tensor of a run: dtype, concrete shape and copies. Kept in the context between
/// runs so its shape storage is reused.
pub(crate) struct Value {
    pub live: bool,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub host: Host,
    pub dev: Dev,
}

impl Value {
    pub(crate) fn empty() -> Value {
        Value {
            live: false,
            dtype: DType::F32,
            shape: Vec::new(),
            host: Host::None,
            dev: Dev::None,
        }
    }

    /// Makes the slot live with this dtype and shape and no copies, reusing its storage.
    pub(crate) fn reset(&mut self, dtype: DType, shape: &[usize]) {
        self.live = true;
        self.dtype = dtype;
        self.shape.clear();
        self.shape.extend_from_slice(shape);
        self.host = Host::None;
        self.dev = Dev::None;
    }

    /// Bytes of the dense tensor.
    pub(crate) fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }

    pub(crate) fn desc(&self) -> TensorDesc {
        TensorDesc::new(
            self.dtype,
            self.shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
        )
    }
}

/// Host buffers released during runs, handed out again to tensors of the same or smaller
/// size (the smallest that fits), with their shape storage.
pub(crate) struct HostPool {
    free: Vec<Tensor>,
    /// Largest tensor (bytes) handed out; larger requests are errors.
    pub limit: u64,
}

impl Default for HostPool {
    fn default() -> HostPool {
        HostPool {
            free: Vec::new(),
            limit: crate::limits::physical_memory(),
        }
    }
}

impl HostPool {
    /// A tensor of `dtype` and `shape` (contents unspecified); an error when it is larger
    /// than the limit or the allocator refuses.
    pub(crate) fn take(&mut self, dtype: DType, shape: &[usize]) -> Result<Tensor, String> {
        let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        let bytes = crate::limits::check_tensor(dtype, &dims, self.limit)? as usize;
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, t)| t_capacity(t) >= bytes)
            .min_by_key(|(_, t)| t_capacity(t))
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut t = self.free.swap_remove(i);
                t.reset(dtype, shape);
                Ok(t)
            }
            None => Tensor::try_zeros(dtype, shape).map_err(|e| e.to_string()),
        }
    }

    /// Keeps `t`'s buffer for later; a view of a caller's memory is only dropped.
    pub(crate) fn put(&mut self, t: Tensor) {
        if !t.is_external() {
            self.free.push(t);
        }
    }

    pub(crate) fn held_bytes(&self) -> usize {
        self.free.iter().map(t_capacity).sum()
    }
}

fn t_capacity(t: &Tensor) -> usize {
    t.buffer_capacity()
}

/// The device memory a run allocated, each block with the number of tensors using it
/// (views share blocks). Cleared after each run, keeping its storage.
#[derive(Default)]
pub(crate) struct DevTable {
    blocks: Vec<(DeviceMemory, u32)>,
}

impl DevTable {
    /// Allocates `bytes` on `device`; returns the new block's index.
    pub(crate) fn alloc(
        &mut self,
        device: &mut dyn DeviceContext,
        bytes: usize,
    ) -> Result<usize, String> {
        let memory = device.alloc(bytes)?;
        self.blocks.push((memory, 1));
        Ok(self.blocks.len() - 1)
    }

    /// The address of `offset` bytes into block `index`.
    pub(crate) fn ptr(&self, index: usize, offset: usize) -> u64 {
        self.blocks[index].0.ptr + offset as u64
    }

    /// One more tensor uses block `index`.
    pub(crate) fn share(&mut self, index: usize) {
        self.blocks[index].1 += 1;
    }

    /// One tensor less uses block `index`; the last gives it back to `device`.
    pub(crate) fn drop_ref(&mut self, device: &mut dyn DeviceContext, index: usize) {
        let (memory, refs) = &mut self.blocks[index];
        if *refs > 0 {
            *refs -= 1;
            if *refs == 0 {
                device.release(*memory);
            }
        }
    }

    /// Takes block `index` out of the run (a recorded run holds it from now on).
    pub(crate) fn detach(&mut self, index: usize) -> Option<DeviceMemory> {
        let (memory, refs) = &mut self.blocks[index];
        (std::mem::take(refs) > 0).then_some(*memory)
    }

    /// Gives every block still used back to `device` and forgets them.
    pub(crate) fn clear(&mut self, device: &mut dyn DeviceContext) {
        for (memory, refs) in self.blocks.drain(..) {
            if refs > 0 {
                device.release(memory);
            }
        }
    }
}

/// A value's device view for a kernel.
pub(crate) fn device_tensor(v: &Value, ptr: u64) -> DeviceTensor {
    DeviceTensor {
        desc: v.desc(),
        ptr,
    }
}
