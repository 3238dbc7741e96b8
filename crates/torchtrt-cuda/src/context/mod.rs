//! [`CudaDeviceContext`]: what one execution context holds on a GPU — its stream, a pool of
//! device memory reused from run to run, a [`ScratchPool`] for the kernels' own scratch,
//! copies, and CUDA graphs of whole runs — behind the core [`DeviceContext`] contract that
//! the runtime's one plan walk drives.

mod copy;
mod graph;

use std::any::Any;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::Arc;

use torchtrt_core::backend::{CapturedRun, DeviceContext, DeviceMemory};

use crate::device::CudaDevice;
use crate::error::CudaResult;
use crate::memory::{DeviceBuffer, ScratchPool};
use crate::stream::{Event, Stream};
use graph::CudaGraph;

/// One execution context's resources on a CUDA device. Its memory comes from the device's
/// caching allocator through pools of its own, so memory it frees while its queued work
/// may still use it is never handed to another context's stream.
pub struct CudaDeviceContext {
    device: CudaDevice,
    own: Stream,
    /// A caller's stream, current during an `enqueue`.
    caller: Option<Stream>,
    scratch: Arc<ScratchPool>,
    /// Every block handed out, by id; `None` for free ids.
    blocks: Vec<Option<DeviceBuffer>>,
    free_ids: Vec<u32>,
    /// Released blocks by capacity.
    pool: BTreeMap<usize, Vec<u32>>,
    /// Recorded after an `enqueue`'s work on its caller's stream: what dropping the context
    /// waits for (a device-wide synchronisation would break other threads' captures).
    enqueued: Option<Event>,
    /// Runs begun and not ended on this thread (they nest during a capture).
    depth: u32,
}

impl CudaDeviceContext {
    /// A context on `device` with a stream of its own.
    pub fn new(device: &CudaDevice) -> CudaResult<CudaDeviceContext> {
        Ok(CudaDeviceContext {
            own: device.new_stream()?,
            scratch: device.allocator().scratch_pool(),
            device: device.clone(),
            caller: None,
            blocks: Vec::new(),
            free_ids: Vec::new(),
            pool: BTreeMap::new(),
            enqueued: None,
            depth: 0,
        })
    }

    /// The device.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// The stream work is queued on now: a caller's during an `enqueue`, else the
    /// context's own.
    pub fn current_stream(&self) -> &Stream {
        self.caller.as_ref().unwrap_or(&self.own)
    }

    /// The CUDA context behind a device context the CUDA backend made; `Err` for another
    /// backend's.
    pub fn of(device: &dyn DeviceContext) -> Result<&CudaDeviceContext, String> {
        device
            .as_any()
            .downcast_ref::<CudaDeviceContext>()
            .ok_or_else(|| format!("a CUDA kernel was given {}'s context", device.name()))
    }
}

fn message(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl DeviceContext for CudaDeviceContext {
    fn name(&self) -> String {
        format!("cuda:{}", self.device.ordinal())
    }

    fn begin_run(&mut self) -> Result<(), String> {
        self.device.bind().map_err(message)?;
        self.scratch.enter_raw();
        self.depth += 1;
        Ok(())
    }

    fn end_run(&mut self) {
        if self.depth > 0 {
            self.depth -= 1;
            ScratchPool::leave_raw();
        }
    }

    fn alloc(&mut self, bytes: usize) -> Result<DeviceMemory, String> {
        let class = crate::memory::size_class(bytes);
        if let Some(id) = self.pool.get_mut(&class).and_then(Vec::pop)
            && let Some(b) = &self.blocks[id as usize]
        {
            return Ok(DeviceMemory {
                ptr: b.ptr(),
                bytes: b.capacity(),
                id,
            });
        }
        let buffer = self.device.allocator().alloc(bytes).map_err(message)?;
        let memory = DeviceMemory {
            ptr: buffer.ptr(),
            bytes: buffer.capacity(),
            id: 0,
        };
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.blocks[id as usize] = Some(buffer);
                id
            }
            None => {
                self.blocks.push(Some(buffer));
                (self.blocks.len() - 1) as u32
            }
        };
        Ok(DeviceMemory { id, ..memory })
    }

    fn release(&mut self, memory: DeviceMemory) {
        if let Some(Some(b)) = self.blocks.get(memory.id as usize)
            && b.ptr() == memory.ptr
        {
            self.pool.entry(b.capacity()).or_default().push(memory.id);
        }
    }

    unsafe fn upload(&mut self, src: &[u8], dst: u64) -> Result<(), String> {
        // SAFETY: per the trait's contract.
        unsafe { copy::upload(self.current_stream(), src, dst) }.map_err(message)
    }

    unsafe fn download(&mut self, src: u64, dst: &mut [u8]) -> Result<(), String> {
        // SAFETY: per the trait's contract.
        unsafe { copy::download(self.current_stream(), src, dst) }.map_err(message)
    }

    unsafe fn copy(&mut self, src: u64, dst: u64, bytes: usize) -> Result<(), String> {
        // SAFETY: per the trait's contract.
        unsafe { copy::device_copy(self.current_stream(), src, dst, bytes) }.map_err(message)
    }

    fn synchronize(&mut self) -> Result<(), String> {
        self.current_stream().synchronize().map_err(message)?;
        match (&self.caller, &self.enqueued) {
            (None, Some(e)) => e.synchronize().map_err(message),
            _ => Ok(()),
        }
    }

    unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<(), String> {
        // SAFETY: per the trait's contract, the stream outlives its use here.
        self.caller = Some(unsafe { Stream::from_raw(&self.device, stream) });
        Ok(())
    }

    fn restore_stream(&mut self) -> Result<(), String> {
        let Some(caller) = self.caller.take() else {
            return Ok(());
        };
        if self.enqueued.is_none() {
            self.enqueued = Some(Event::new(&self.device).map_err(message)?);
        }
        match &self.enqueued {
            Some(e) => e.record(&caller).map_err(message),
            None => Ok(()),
        }
    }

    fn stream(&self) -> *mut c_void {
        self.current_stream().raw()
    }

    fn begin_capture(&mut self) -> Result<(), String> {
        graph::begin(self.current_stream()).map_err(message)
    }

    fn end_capture(&mut self, ok: bool) -> Result<Box<dyn CapturedRun>, String> {
        let recorded = graph::end(self.current_stream(), ok).map_err(message)?;
        Ok(Box::new(recorded))
    }

    fn replay(&mut self, run: &dyn CapturedRun) -> Result<(), String> {
        let graph = run
            .as_any()
            .downcast_ref::<CudaGraph>()
            .ok_or("the recording is not a CUDA graph")?;
        graph.launch(self.current_stream()).map_err(message)
    }

    fn pooled_bytes(&self) -> usize {
        self.pool.iter().map(|(cap, ids)| cap * ids.len()).sum()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaDeviceContext {
    fn drop(&mut self) {
        let _ = self.own.synchronize();
        if let Some(e) = &self.enqueued {
            let _ = e.synchronize();
        }
    }
}
