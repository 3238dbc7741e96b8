//! Checks for the CUDA driver, a device and NVRTC before anything touches them (cudarc
//! panics when a library it loads lazily is missing).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use cudarc::driver::result;

use crate::error::{CudaError, CudaResult};

/// Loads and initialises the driver once per process; `Err` with the reason when there is no
/// driver library, initialisation fails, or no device is present.
pub fn driver() -> CudaResult<()> {
    static STATE: OnceLock<Result<(), String>> = OnceLock::new();
    STATE
        .get_or_init(init_driver)
        .clone()
        .map_err(CudaError::NoDevice)
}

fn init_driver() -> Result<(), String> {
    // SAFETY: only tries to dlopen the driver library by its candidate names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("the CUDA driver library (libcuda.so.1) was not found".into());
    }
    let count = catch_unwind(AssertUnwindSafe(|| {
        result::init().map_err(|e| format!("cuInit failed: {e:?}"))?;
        result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e:?}"))
    }))
    .map_err(|_| "the CUDA driver library lacks an entry point this build needs".to_string())??;
    if count <= 0 {
        return Err("the driver reports no CUDA devices".into());
    }
    Ok(())
}

/// Number of CUDA devices; `Err(NoDevice)` when there are none or no driver.
pub fn device_count() -> CudaResult<usize> {
    driver()?;
    result::device::get_count()
        .map(|n| n.max(0) as usize)
        .map_err(crate::error::driver("cuDeviceGetCount"))
}

/// Whether a CUDA device can be used; the reason when not.
pub fn available() -> bool {
    driver().is_ok()
}

/// Checks that NVRTC can be loaded (needed to compile kernels, not to load stored ones).
pub fn nvrtc() -> CudaResult<()> {
    static STATE: OnceLock<Result<(), String>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            // SAFETY: only tries to dlopen the NVRTC library by its candidate names.
            if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
                Ok(())
            } else {
                Err("libnvrtc was not found (install the CUDA toolkit's NVRTC or set LD_LIBRARY_PATH)".into())
            }
        })
        .clone()
        .map_err(CudaError::NoNvrtc)
}
