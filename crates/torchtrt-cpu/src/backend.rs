//! The CPU backend: the kernel table and the thread pool kernels run on.

use std::sync::Arc;

use rayon::{ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder};
use torchtrt_core::plugin_api::DeviceKind;
use torchtrt_core::{Backend, InferInput, Kernel, LayerKind, Tensor};

use crate::kernels;

/// Runs torchtrt layers on the host CPU.
///
/// Kernels parallelise with rayon: on the global pool ([`CpuBackend::new`]) or on a pool the
/// backend owns ([`CpuBackend::with_threads`]), which every kernel it prepares then uses.
#[derive(Clone, Default)]
pub struct CpuBackend {
    pool: Option<Arc<ThreadPool>>,
}

impl CpuBackend {
    /// A backend whose kernels run on rayon's global thread pool.
    pub fn new() -> CpuBackend {
        CpuBackend { pool: None }
    }

    /// A backend with its own pool of `threads` worker threads (`0`: one per core).
    pub fn with_threads(threads: usize) -> Result<CpuBackend, ThreadPoolBuildError> {
        let pool = ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("torchtrt-cpu-{i}"))
            .build()?;
        Ok(CpuBackend {
            pool: Some(Arc::new(pool)),
        })
    }

    /// Number of threads kernels of this backend use.
    pub fn num_threads(&self) -> usize {
        match &self.pool {
            Some(pool) => pool.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn prepare(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        let kernel = kernels::prepare(layer, inputs)?;
        Ok(match &self.pool {
            Some(pool) => Box::new(Pooled {
                pool: pool.clone(),
                kernel,
            }),
            None => kernel,
        })
    }

    /// Runs `f` on a worker of the backend's pool (rayon's global pool for
    /// [`CpuBackend::new`]): the layers' parallel loops then start from a worker, which hands
    /// tasks to the others through its own queue instead of blocking the caller and waking
    /// it again after every layer.
    fn host_threads(&self) -> usize {
        self.num_threads()
    }

    fn run_scope(&self, f: &mut (dyn FnMut() + Send)) {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => rayon::scope(|_| f()),
        }
    }
}

/// A kernel that runs inside the backend's own thread pool.
struct Pooled {
    pool: Arc<ThreadPool>,
    kernel: Box<dyn Kernel>,
}

impl Kernel for Pooled {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        self.pool.install(|| self.kernel.execute(inputs, outputs))
    }
}
