//! Streams (ordered queues of device work) and events (markers for timing and waiting).

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult, driver};
use crate::memory::DeviceBuffer;

/// A non-blocking CUDA stream of one device; destroyed on drop unless it wraps a caller's
/// stream ([`Stream::from_raw`]).
pub struct Stream {
    raw: sys::CUstream,
    device: CudaDevice,
    owned: bool,
}

// SAFETY: a CUstream may be used from any thread once its context is current, which every
// method here ensures.
unsafe impl Send for Stream {}
// SAFETY: as above; the driver serialises work queued on one stream.
unsafe impl Sync for Stream {}

impl Stream {
    pub(crate) fn new(device: &CudaDevice) -> CudaResult<Stream> {
        device.bind()?;
        let raw = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(driver("cuStreamCreate"))?;
        Ok(Stream {
            raw,
            device: device.clone(),
            owned: true,
        })
    }

    /// Wraps a stream the caller created (a `CUstream`, or null for the legacy default
    /// stream) without taking ownership: dropping the wrapper leaves it alive.
    ///
    /// # Safety
    /// `raw` must be null or a live stream of `device`'s primary context, and outlive the
    /// wrapper.
    pub unsafe fn from_raw(device: &CudaDevice, raw: *mut c_void) -> Stream {
        Stream {
            raw: raw.cast(),
            device: device.clone(),
            owned: false,
        }
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    /// The raw `CUstream`, as handed to plugins in a CUDA launch.
    pub fn raw(&self) -> *mut c_void {
        self.raw.cast()
    }

    /// Waits until all work queued so far has finished.
    pub fn synchronize(&self) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: `raw` is a live stream of the bound context.
        unsafe { result::stream::synchronize(self.raw) }.map_err(driver("cuStreamSynchronize"))
    }

    /// Whether work queued on this stream is being captured into a graph (where nothing
    /// may wait for it).
    pub fn is_capturing(&self) -> CudaResult<bool> {
        self.device.bind()?;
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: `raw` is a live stream of the bound context; `status` is written once.
        unsafe { sys::cuStreamIsCapturing(self.raw, &mut status) }
            .result()
            .map_err(driver("cuStreamIsCapturing"))?;
        Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    /// Makes later work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: both handles are live.
        unsafe {
            result::stream::wait_event(
                self.raw,
                event.raw,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(driver("cuStreamWaitEvent"))
    }

    /// Copies `src` into the start of `dst` and waits for the copy.
    pub fn upload(&self, src: &[u8], dst: &DeviceBuffer) -> CudaResult<()> {
        check_len("upload", src.len(), dst.len())?;
        self.device.bind()?;
        // SAFETY: `dst` holds at least `src.len()` bytes; the stream is synchronised before
        // `src` can go away.
        unsafe { result::memcpy_htod_async(dst.ptr(), src, self.raw) }
            .map_err(driver("cuMemcpyHtoDAsync"))?;
        self.synchronize()
    }

    /// Copies the start of `src` into `dst` and waits for the copy.
    pub fn download(&self, src: &DeviceBuffer, dst: &mut [u8]) -> CudaResult<()> {
        check_len("download", dst.len(), src.len())?;
        self.device.bind()?;
        // SAFETY: `src` holds at least `dst.len()` bytes; the stream is synchronised before
        // `dst` can be touched again.
        unsafe { result::memcpy_dtoh_async(dst, src.ptr(), self.raw) }
            .map_err(driver("cuMemcpyDtoHAsync"))?;
        self.synchronize()
    }

    /// Queues a copy of `bytes` bytes from `src` to `dst` (device to device).
    pub fn copy(&self, src: &DeviceBuffer, dst: &DeviceBuffer, bytes: usize) -> CudaResult<()> {
        check_len("device copy source", bytes, src.len())?;
        check_len("device copy destination", bytes, dst.len())?;
        self.device.bind()?;
        // SAFETY: both buffers hold at least `bytes` bytes and stay alive while the caller
        // orders later work on this stream.
        unsafe { result::memcpy_dtod_async(dst.ptr(), src.ptr(), bytes, self.raw) }
            .map_err(driver("cuMemcpyDtoDAsync"))
    }

    /// Queues filling the first `bytes` bytes of `dst` with `value`.
    pub fn memset(&self, dst: &DeviceBuffer, value: u8, bytes: usize) -> CudaResult<()> {
        check_len("memset", bytes, dst.len())?;
        self.device.bind()?;
        // SAFETY: `dst` holds at least `bytes` bytes.
        unsafe { result::memset_d8_async(dst.ptr(), value, bytes, self.raw) }
            .map_err(driver("cuMemsetD8Async"))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned && self.device.bind().is_ok() {
            // SAFETY: the stream is live and dropped once; pending work still completes.
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

fn check_len(what: &str, need: usize, have: usize) -> CudaResult<()> {
    if need > have {
        return Err(CudaError::Invalid(format!(
            "{what} of {need} bytes does not fit a device buffer of {have} bytes"
        )));
    }
    Ok(())
}

/// A CUDA event with timing enabled; destroyed on drop.
pub struct Event {
    raw: sys::CUevent,
    device: CudaDevice,
}

// SAFETY: event handles are usable from any thread with the context current.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// A new event on `device`.
    pub fn new(device: &CudaDevice) -> CudaResult<Event> {
        device.bind()?;
        let raw = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(driver("cuEventCreate"))?;
        Ok(Event {
            raw,
            device: device.clone(),
        })
    }

    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: both handles are live and of the same context.
        unsafe { result::event::record(self.raw, stream.raw) }.map_err(driver("cuEventRecord"))
    }

    /// Waits until the recorded work has completed.
    pub fn synchronize(&self) -> CudaResult<()> {
        self.device.bind()?;
        // SAFETY: the event is live.
        unsafe { result::event::synchronize(self.raw) }.map_err(driver("cuEventSynchronize"))
    }

    /// Milliseconds between `self` and the later event `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> CudaResult<f32> {
        self.device.bind()?;
        end.synchronize()?;
        // SAFETY: both events are live and recorded.
        unsafe { result::event::elapsed(self.raw, end.raw) }.map_err(driver("cuEventElapsedTime"))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: the event is live and destroyed once.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}
