//! Copies between host memory and device addresses, queued on a stream.

use cudarc::driver::result;

use crate::error::{CudaResult, driver};
use crate::stream::Stream;

/// Queues a copy of `src` to the device address `dst`. From pageable memory the driver
/// stages `src` before returning, so it may be reused at once.
///
/// # Safety
/// `dst` must hold at least `src.len()` bytes of the stream's device.
pub(crate) unsafe fn upload(stream: &Stream, src: &[u8], dst: u64) -> CudaResult<()> {
    if src.is_empty() {
        return Ok(());
    }
    stream.device().bind()?;
    // SAFETY: per the function's contract.
    unsafe { result::memcpy_htod_async(dst, src, stream.raw().cast()) }
        .map_err(driver("cuMemcpyHtoDAsync"))
}

/// Copies `dst.len()` bytes from the device address `src` into `dst` and waits for the
/// stream (and so for everything queued before).
///
/// # Safety
/// `src` must hold at least `dst.len()` bytes of the stream's device.
pub(crate) unsafe fn download(stream: &Stream, src: u64, dst: &mut [u8]) -> CudaResult<()> {
    if !dst.is_empty() {
        stream.device().bind()?;
        // SAFETY: per the function's contract; the stream is synchronised below before
        // `dst` can be read.
        unsafe { result::memcpy_dtoh_async(dst, src, stream.raw().cast()) }
            .map_err(driver("cuMemcpyDtoHAsync"))?;
    }
    stream.synchronize()
}

/// Queues a device-to-device copy of `bytes` bytes.
///
/// # Safety
/// Both addresses must hold at least `bytes` bytes of the stream's device.
pub(crate) unsafe fn device_copy(
    stream: &Stream,
    src: u64,
    dst: u64,
    bytes: usize,
) -> CudaResult<()> {
    if bytes == 0 || src == dst {
        return Ok(());
    }
    stream.device().bind()?;
    // SAFETY: per the function's contract.
    unsafe { result::memcpy_dtod_async(dst, src, bytes, stream.raw().cast()) }
        .map_err(driver("cuMemcpyDtoDAsync"))
}
