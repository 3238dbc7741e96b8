//! [`DeviceContext`]: the resources one execution context holds on a backend's device — a
//! stream, a pool of device memory, copies between host and device, and recorded runs
//! (CUDA graphs) — which the runtime's one plan walk drives for every device backend.

use std::any::Any;
use std::ffi::c_void;

/// Device memory handed out by a [`DeviceContext`]: its address, its usable size and the
/// context's handle for it. Plain data; given back with [`DeviceContext::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Device address.
    pub ptr: u64,
    /// Usable bytes (at least what was asked for).
    pub bytes: usize,
    /// The context's handle for this allocation.
    pub id: u32,
}

/// A run recorded on a device (a CUDA graph), replayed with [`DeviceContext::replay`].
pub trait CapturedRun: Send {
    /// The recording as `Any`, for its context to recover its concrete type.
    fn as_any(&self) -> &dyn Any;
}

/// One execution context's resources on a device. Work is queued in order on the context's
/// current stream: its own, or during [`DeviceContext::use_stream`] a caller's. Errors are
/// messages; the runtime adds the layer or tensor they concern.
pub trait DeviceContext: Send {
    /// A short name of the device for messages (`cuda:0`).
    fn name(&self) -> String;

    /// Called before each run on the calling thread (e.g. to make the device current).
    fn begin_run(&mut self) -> Result<(), String>;

    /// Called after each run begun with [`DeviceContext::begin_run`], on the same thread.
    fn end_run(&mut self) {}

    /// Device memory of at least `bytes` bytes, from the context's pool when it holds a
    /// block of that size class. Its contents are undefined.
    fn alloc(&mut self, bytes: usize) -> Result<DeviceMemory, String>;

    /// Gives memory from [`DeviceContext::alloc`] back to the context's pool. Work already
    /// queued on the stream may still use it; the pool only hands it to work queued later
    /// on the same stream.
    fn release(&mut self, memory: DeviceMemory);

    /// Queues a copy of `src` into device memory at `dst`; `src` may be reused on return.
    ///
    /// # Safety
    /// `dst` must hold `src.len()` writable bytes of this device.
    unsafe fn upload(&mut self, src: &[u8], dst: u64) -> Result<(), String>;

    /// Copies device memory at `src` into `dst` and waits until the copy (and so all work
    /// queued before it) is done.
    ///
    /// # Safety
    /// `src` must hold `dst.len()` readable bytes of this device.
    unsafe fn download(&mut self, src: u64, dst: &mut [u8]) -> Result<(), String>;

    /// Queues a copy of `bytes` bytes between device addresses.
    ///
    /// # Safety
    /// Both addresses must hold `bytes` bytes of this device; they must not overlap.
    unsafe fn copy(&mut self, src: u64, dst: u64, bytes: usize) -> Result<(), String>;

    /// Waits for the work queued on the current stream; outside an `enqueue`, also for the
    /// work the last `enqueue` left on its caller's stream.
    fn synchronize(&mut self) -> Result<(), String>;

    /// Makes `stream` (a native stream handle of this device, null for the device's default
    /// stream) the current stream until [`DeviceContext::restore_stream`].
    ///
    /// # Safety
    /// `stream` must stay valid until it is restored.
    unsafe fn use_stream(&mut self, stream: *mut c_void) -> Result<(), String>;

    /// Makes the context's own stream current again, after noting the end of the work the
    /// caller's stream holds (dropping the context waits for it).
    fn restore_stream(&mut self) -> Result<(), String>;

    /// The current stream's native handle, for kernels of the same backend.
    fn stream(&self) -> *mut c_void;

    /// Starts recording the work queued from now on instead of running it; `Err` when the
    /// device cannot record runs.
    fn begin_capture(&mut self) -> Result<(), String> {
        Err(format!("{} cannot record runs", self.name()))
    }

    /// Ends a recording begun by [`DeviceContext::begin_capture`]. `ok` is false when the
    /// walk failed: the recording is dropped and `Err` is returned.
    fn end_capture(&mut self, ok: bool) -> Result<Box<dyn CapturedRun>, String> {
        let _ = ok;
        Err(format!("{} cannot record runs", self.name()))
    }

    /// Queues a recorded run on the current stream.
    fn replay(&mut self, run: &dyn CapturedRun) -> Result<(), String> {
        let _ = run;
        Err(format!("{} cannot record runs", self.name()))
    }

    /// Bytes of device memory the context's pool holds for later runs.
    fn pooled_bytes(&self) -> usize;

    /// The context as `Any`, for the backend's own kernels to recover its concrete type.
    fn as_any(&self) -> &dyn Any;
}
