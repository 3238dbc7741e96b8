//! The CUDA backends of this process: one per device, created on first use and shared by
//! every compiler and runtime in the process, with the CPU backend preparing the layers
//! that have no CUDA kernel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use torchtrt_core::Backend;
use torchtrt_cpu::CpuBackend;

use crate::backend::CudaBackend;
use crate::error::CudaResult;
use crate::probe;

/// The backend of `cuda:ordinal`, created on first use and shared afterwards;
/// `Err(NoDevice)` without a GPU.
pub fn backend(ordinal: usize) -> CudaResult<Arc<CudaBackend>> {
    static BACKENDS: OnceLock<Mutex<HashMap<usize, Arc<CudaBackend>>>> = OnceLock::new();
    let mut map = BACKENDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(b) = map.get(&ordinal) {
        return Ok(b.clone());
    }
    let host: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let backend = Arc::new(CudaBackend::new(ordinal, host)?);
    map.insert(ordinal, backend.clone());
    Ok(backend)
}

/// The backends of every CUDA device of this machine; empty without a GPU.
pub fn backends() -> Vec<Arc<CudaBackend>> {
    let count = probe::device_count().unwrap_or(0);
    (0..count).filter_map(|n| backend(n).ok()).collect()
}
