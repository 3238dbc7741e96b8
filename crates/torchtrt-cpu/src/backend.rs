//! The CPU backend: the kernel table and the thread pool kernels run on.

use std::sync::Arc;

use rayon::ThreadPoolBuildError;
use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::{Backend, ChannelsLast, InferInput, Kernel, LayerKind, Tensor};

use crate::kernels;
use crate::pool::Pool;

/// Runs torchtrt layers on the host CPU.
///
/// Kernels parallelise with rayon: on the global pool ([`CpuBackend::new`]) or on a pool the
/// backend owns ([`CpuBackend::with_threads`]), which every kernel it prepares then uses.
#[derive(Clone)]
pub struct CpuBackend {
    pool: Arc<Pool>,
}

impl Default for CpuBackend {
    fn default() -> CpuBackend {
        CpuBackend::new()
    }
}

impl CpuBackend {
    /// A backend whose kernels run on rayon's global thread pool.
    pub fn new() -> CpuBackend {
        CpuBackend {
            pool: Pool::global(),
        }
    }

    /// A backend with its own pool of `threads` worker threads (`0`: one per core).
    pub fn with_threads(threads: usize) -> Result<CpuBackend, ThreadPoolBuildError> {
        Ok(CpuBackend {
            pool: Arc::new(Pool::owned(threads)?),
        })
    }

    /// Number of threads kernels of this backend use.
    pub fn num_threads(&self) -> usize {
        self.pool.num_threads()
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
        Ok(if self.pool.is_global() {
            kernel
        } else {
            Box::new(Pooled {
                pool: self.pool.clone(),
                kernel,
            })
        })
    }

    fn host_threads(&self) -> usize {
        self.num_threads()
    }

    /// Depthwise layers faster channels last, 1×1 layers either way, on AVX-512 in f32
    /// (`kernels::conv_nhwc`): the layout pass then runs MobileNet- and EfficientNet-style
    /// blocks channels last, and a network without depthwise layers (ResNet) channels first.
    fn channels_last(&self, layer: &Convolution, inputs: &[InferInput<'_>]) -> ChannelsLast {
        kernels::channels_last(layer, inputs)
    }

    /// Every integer convolution and MatMul computing in f32.
    fn runs_integer(&self, layer: &LayerKind, _inputs: &[InferInput<'_>]) -> bool {
        match layer {
            LayerKind::QuantizedConvolution(l) => l.dtype == DType::F32,
            LayerKind::QuantizedMatMul(l) => l.dtype == DType::F32,
            _ => false,
        }
    }

    /// Runs `f` on a worker of the backend's pool (rayon's global pool for
    /// [`CpuBackend::new`]): the layers' parallel loops then start from a worker, which hands
    /// tasks to the others through its own queue instead of blocking the caller and waking
    /// it again after every layer. A worker then polls for the next run a while
    /// (`crate::pool`).
    fn run_scope(&self, f: &mut (dyn FnMut() + Send)) {
        self.pool.install(f)
    }
}

/// A kernel that runs inside the backend's own thread pool.
struct Pooled {
    pool: Arc<Pool>,
    kernel: Box<dyn Kernel>,
}

impl Kernel for Pooled {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        self.pool.install(|| self.kernel.execute(inputs, outputs))
    }
}
