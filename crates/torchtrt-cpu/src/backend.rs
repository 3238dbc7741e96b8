//! The CPU backend: the kernel table and the thread pool kernels run on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rayon::{ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder, Yield};
use torchtrt_core::plugin_api::DeviceKind;
use torchtrt_core::{Backend, InferInput, Kernel, LayerKind, Tensor};

use crate::kernels;

/// Runs torchtrt layers on the host CPU.
///
/// Kernels parallelise with rayon: on the global pool ([`CpuBackend::new`]) or on a pool the
/// backend owns ([`CpuBackend::with_threads`]), which every kernel it prepares then uses.
#[derive(Clone, Default)]
pub struct CpuBackend {
    pool: Option<Arc<Pool>>,
}

impl CpuBackend {
    /// A backend whose kernels run on rayon's global thread pool.
    pub fn new() -> CpuBackend {
        CpuBackend { pool: None }
    }

    /// A backend with its own pool of `threads` worker threads (`0`: one per core).
    pub fn with_threads(threads: usize) -> Result<CpuBackend, ThreadPoolBuildError> {
        let threads = ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("torchtrt-cpu-{i}"))
            .build()?;
        Ok(CpuBackend {
            pool: Some(Arc::new(Pool {
                threads,
                polling: Arc::new(AtomicBool::new(false)),
            })),
        })
    }

    /// Number of threads kernels of this backend use.
    pub fn num_threads(&self) -> usize {
        match &self.pool {
            Some(pool) => pool.threads.current_num_threads(),
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

/// How long a worker keeps polling for the next call after the last job it ran.
const LINGER: Duration = Duration::from_micros(200);

/// A backend's own threads, one of which polls for a while after each call.
///
/// A call from outside hands its work to a worker and waits; a sleeping worker takes tens of
/// microseconds to wake (more on a virtual machine, whose idle processors halt), which a
/// call of a fraction of a millisecond feels. After a call, one worker on a processor other
/// than the caller's stays awake ([`LINGER`] after the last job it took, or until it is moved
/// to the caller's processor), so back-to-back calls start at once. The others sleep: a
/// worker spinning where the caller is woken holds it off for tens of microseconds, as the
/// scheduler lets it run on.
struct Pool {
    threads: ThreadPool,
    polling: Arc<AtomicBool>,
}

impl Pool {
    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if self.threads.current_thread_index().is_some() {
            return f();
        }
        let result = self.threads.install(f);
        self.keep_one_awake();
        result
    }

    fn keep_one_awake(&self) {
        let workers = self.threads.current_num_threads();
        if workers < 2 || self.polling.swap(true, Ordering::AcqRel) {
            return;
        }
        let caller = current_cpu();
        let polling = self.polling.clone();
        let claimed = Arc::new(AtomicBool::new(false));
        let left = Arc::new(AtomicUsize::new(workers));
        self.threads.spawn_broadcast(move |_| {
            let elsewhere = |cpu: Option<usize>| cpu.is_none() || cpu != caller;
            if elsewhere(current_cpu()) && !claimed.swap(true, Ordering::AcqRel) {
                let mut last_job = Instant::now();
                while last_job.elapsed() < LINGER && elsewhere(current_cpu()) {
                    match rayon::yield_now() {
                        Some(Yield::Executed) => last_job = Instant::now(),
                        _ => std::hint::spin_loop(),
                    }
                }
            }
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                polling.store(false, Ordering::Release);
            }
        });
    }
}

/// The processor the calling thread is on, where the system says.
fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's state.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
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
