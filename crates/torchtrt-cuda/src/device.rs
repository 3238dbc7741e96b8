//! One GPU: its primary context, compute capability and name.

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use crate::error::{CudaError, CudaResult, driver};
use crate::memory::CachingAllocator;
use crate::probe;
use crate::stream::Stream;

/// A CUDA device (its primary context). Cheap to clone; every clone shares the context and
/// the device's caching allocator.
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) inner: Arc<DeviceInner>,
}

pub(crate) struct DeviceInner {
    pub(crate) ctx: Arc<CudaContext>,
    ordinal: usize,
    capability: (u32, u32),
    name: String,
    allocator: std::sync::OnceLock<CachingAllocator>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cuda:{} ({}, sm_{}{})",
            self.inner.ordinal, self.inner.name, self.inner.capability.0, self.inner.capability.1
        )
    }
}

impl CudaDevice {
    /// Opens device `ordinal` (`cuda:N`). `Err(NoDevice)` without a driver or device, and
    /// [`CudaError::Invalid`] for an ordinal past the device count.
    pub fn open(ordinal: usize) -> CudaResult<CudaDevice> {
        let count = probe::device_count()?;
        if ordinal >= count {
            return Err(CudaError::Invalid(format!(
                "cuda:{ordinal} does not exist: this machine has {count} CUDA device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("cuDevicePrimaryCtxRetain"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver("cuDeviceGetAttribute"))?;
        let name = ctx.name().map_err(driver("cuDeviceGetName"))?;
        Ok(CudaDevice {
            inner: Arc::new(DeviceInner {
                ctx,
                ordinal,
                capability: (major as u32, minor as u32),
                name,
                allocator: std::sync::OnceLock::new(),
            }),
        })
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.inner.ordinal
    }

    /// Compute capability `(major, minor)`, `(9, 0)` on Hopper.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.inner.capability
    }

    /// The marketing name, e.g. `NVIDIA H200`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> CudaResult<usize> {
        self.inner
            .ctx
            .total_mem()
            .map_err(driver("cuDeviceTotalMem"))
    }

    /// A device attribute, e.g. the multiprocessor count.
    pub fn attribute(&self, attribute: sys::CUdevice_attribute) -> CudaResult<i32> {
        self.inner
            .ctx
            .attribute(attribute)
            .map_err(driver("cuDeviceGetAttribute"))
    }

    /// Number of streaming multiprocessors.
    pub fn multiprocessors(&self) -> CudaResult<u32> {
        self.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map(|n| n.max(1) as u32)
    }

    /// Makes this device's context current on the calling thread; every method that calls the
    /// driver does this first.
    pub fn bind(&self) -> CudaResult<()> {
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(driver("cuCtxSetCurrent"))
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> CudaResult<()> {
        self.bind()?;
        self.inner
            .ctx
            .synchronize()
            .map_err(driver("cuCtxSynchronize"))
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> CudaResult<Stream> {
        Stream::new(self)
    }

    /// The device's caching allocator (one per device, shared by every clone).
    pub fn allocator(&self) -> &CachingAllocator {
        self.inner
            .allocator
            .get_or_init(|| CachingAllocator::new(self))
    }

    /// The raw context handle, for code that calls the driver itself.
    pub fn raw_context(&self) -> sys::CUcontext {
        self.inner.ctx.cu_ctx()
    }
}
