//! The threads a CPU backend's kernels run on: the others poll while one runs a call, and one
//! polls for a while after each call.
//!
//! A call from outside hands its work to a worker and waits; a sleeping worker takes tens of
//! microseconds to wake (more on a virtual machine, whose idle processors halt, and
//! milliseconds where the host gave the processor to another machine meanwhile), which a
//! call of a fraction of a millisecond feels, and a network's run feels at every layer whose
//! parallel loop follows a serial stretch longer than rayon's few yields before sleeping.
//! So while a call runs, the pool's other workers poll for its tasks ([`HELP_IDLE`] without
//! one at most, so that a helper never waits on work it holds up), as onnxruntime's
//! spinning intra-op threads do; `TORCHTRT_CPU_SPIN=0` turns that off. After a call, one
//! worker on a processor other than the caller's stays awake ([`LINGER`] after the last job
//! it took, or until it is moved to the caller's processor), so back-to-back calls start at
//! once. The others sleep: a worker spinning where the caller is woken holds it off for tens
//! of microseconds, as the scheduler lets it run on.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rayon::{BroadcastContext, ThreadPool, ThreadPoolBuildError, ThreadPoolBuilder, Yield};

/// How long a worker keeps polling for the next call after the last job it ran.
const LINGER: Duration = Duration::from_micros(200);

/// How long a worker helping a call polls without finding one of its tasks before it sleeps.
const HELP_IDLE: Duration = Duration::from_millis(2);

/// rayon's global pool or one of a backend's own, and whether one of its workers polls.
pub(crate) struct Pool {
    own: Option<ThreadPool>,
    polling: Arc<AtomicBool>,
    /// Workers polling for a running call's tasks: now, and since the pool began.
    helping: Arc<Helpers>,
    /// Whether the other workers poll while a call runs ([`spin_allowed`]).
    spin: bool,
    /// Where a thread runs: [`current_cpu`] (tests place every thread apart).
    place: fn() -> Option<usize>,
}

impl Pool {
    /// rayon's global pool (one handle, shared by every backend that uses it).
    pub(crate) fn global() -> Arc<Pool> {
        static GLOBAL: OnceLock<Arc<Pool>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Pool::new(None))).clone()
    }

    /// A pool of its own with `threads` workers (`0`: one per core).
    pub(crate) fn owned(threads: usize) -> Result<Pool, ThreadPoolBuildError> {
        let own = ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("torchtrt-cpu-{i}"))
            .build()?;
        Ok(Pool::new(Some(own)))
    }

    fn new(own: Option<ThreadPool>) -> Pool {
        Pool {
            own,
            polling: Arc::default(),
            helping: Arc::default(),
            spin: spin_allowed(),
            place: current_cpu,
        }
    }

    /// Whether the pool is rayon's global one.
    pub(crate) fn is_global(&self) -> bool {
        self.own.is_none()
    }

    /// Workers of the pool.
    pub(crate) fn num_threads(&self) -> usize {
        match &self.own {
            Some(pool) => pool.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }

    /// Runs `f` on a worker of the pool (in place when the caller already is one: of this
    /// pool, or of any pool for the global one) while the other workers poll for its tasks,
    /// then keeps a worker polling.
    pub(crate) fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let result = match &self.own {
            Some(pool) if pool.current_thread_index().is_some() => return f(),
            Some(pool) => pool.install(|| self.helped(f)),
            None if rayon::current_thread_index().is_some() => return f(),
            None => rayon::scope(|_| self.helped(f)),
        };
        self.keep_one_awake();
        result
    }

    /// Runs `f` on this worker while every other worker polls for tasks until `f` returns
    /// (or unwinds), or until it has found none for [`HELP_IDLE`]; between polls it yields
    /// its processor to any other thread that waits for one.
    fn helped<R>(&self, f: impl FnOnce() -> R) -> R {
        if !self.spin || self.num_threads() < 2 {
            return f();
        }
        let running = Arc::new(AtomicBool::new(true));
        let runner = rayon::current_thread_index();
        let (flag, helping) = (running.clone(), self.helping.clone());
        let help = move |ctx: BroadcastContext<'_>| {
            if Some(ctx.index()) == runner {
                return;
            }
            helping.now.fetch_add(1, Ordering::AcqRel);
            helping.started.fetch_add(1, Ordering::AcqRel);
            run_jobs(
                HELP_IDLE,
                || flag.load(Ordering::Acquire),
                std::thread::yield_now,
            );
            helping.now.fetch_sub(1, Ordering::AcqRel);
        };
        self.broadcast(help);
        let _done = Done(running);
        f()
    }

    fn keep_one_awake(&self) {
        let workers = self.num_threads();
        if workers < 2 || self.polling.swap(true, Ordering::AcqRel) {
            return;
        }
        let place = self.place;
        let caller = place();
        let polling = self.polling.clone();
        let claimed = AtomicBool::new(false);
        let left = AtomicUsize::new(workers);
        let poll = move |_: BroadcastContext<'_>| {
            let elsewhere = |cpu: Option<usize>| cpu.is_none() || cpu != caller;
            if elsewhere(place()) && !claimed.swap(true, Ordering::AcqRel) {
                run_jobs(LINGER, || elsewhere(place()), std::hint::spin_loop);
            }
            if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                polling.store(false, Ordering::Release);
            }
        };
        self.broadcast(poll);
    }

    /// Runs `op` once on every worker of the pool, without waiting for it.
    fn broadcast(&self, op: impl Fn(BroadcastContext<'_>) + Send + Sync + 'static) {
        match &self.own {
            Some(pool) => pool.spawn_broadcast(op),
            None => rayon::spawn_broadcast(op),
        }
    }
}

/// On a worker: runs the pool's jobs as they come while `go` holds, until `idle` passes
/// after the last one (or the start), calling `wait` between polls that find none.
fn run_jobs(idle: Duration, go: impl Fn() -> bool, wait: fn()) {
    let mut last_job = Instant::now();
    while go() && last_job.elapsed() < idle {
        match rayon::yield_now() {
            Some(Yield::Executed) => last_job = Instant::now(),
            _ => wait(),
        }
    }
}

/// Counts of the workers that poll for a running call's tasks.
#[derive(Default)]
struct Helpers {
    now: AtomicUsize,
    started: AtomicUsize,
}

/// Clears its flag when dropped: a call's helpers stop when it returns or unwinds.
struct Done(Arc<AtomicBool>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Whether workers poll while a call runs: unless `TORCHTRT_CPU_SPIN` is `0` (read once per
/// process).
fn spin_allowed() -> bool {
    static SPIN: OnceLock<bool> = OnceLock::new();
    *SPIN.get_or_init(|| std::env::var("TORCHTRT_CPU_SPIN").as_deref() != Ok("0"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    fn sum_of_squares(pool: &Pool, n: u64) -> u64 {
        pool.install(|| (0..n).into_par_iter().map(|i| i * i).sum())
    }

    fn expected(n: u64) -> u64 {
        (0..n).map(|i| i * i).sum()
    }

    /// Calls from several threads at once, back to back, each get their own answer.
    #[test]
    fn calls_from_many_threads_all_complete() {
        let pool = Arc::new(Pool::owned(2).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    for k in 0..200 {
                        let n = 1000 + 37 * t + k;
                        assert_eq!(sum_of_squares(&pool, n), expected(n));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// A call that panics reaches its caller, and the pool serves the next call.
    #[test]
    fn a_panicking_call_leaves_the_pool_usable() {
        let pool = Pool::owned(2).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| panic!("kernel failed"))
        }));
        assert!(caught.is_err());
        assert_eq!(sum_of_squares(&pool, 5000), expected(5000));
    }

    /// A call from inside the pool runs in place, without waiting on the pool.
    #[test]
    fn a_call_from_a_worker_runs_in_place() {
        let pool = Pool::owned(2).unwrap();
        let nested = pool.install(|| sum_of_squares(&pool, 3000));
        assert_eq!(nested, expected(3000));
    }

    /// The polling worker goes back to sleep once calls stop coming. Every thread is placed
    /// apart from the caller, so that a worker does poll whatever processors the test gets.
    #[test]
    fn polling_stops_when_calls_stop() {
        let mut pool = Pool::owned(2).unwrap();
        pool.place = || None;
        for n in 0..50 {
            sum_of_squares(&pool, 2000 + n);
        }
        stops_within_10_s("a worker polling after the last call", || {
            pool.polling.load(Ordering::Acquire)
        });
    }

    /// Waits until `busy` no longer holds, failing the test after 10 s.
    fn stops_within_10_s(what: &str, busy: impl Fn() -> bool) {
        let start = Instant::now();
        while busy() {
            assert!(
                start.elapsed().as_secs() < 10,
                "{what} still runs after 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// While a call runs, the other worker polls for its tasks, and stops once it returns.
    #[test]
    fn a_worker_helps_while_a_call_runs() {
        let mut pool = Pool::owned(2).unwrap();
        pool.spin = true;
        let helpers = pool.install(|| {
            let start = Instant::now();
            let started = || pool.helping.started.load(Ordering::Acquire);
            while started() == 0 && start.elapsed().as_secs() < 10 {
                std::hint::spin_loop();
            }
            started()
        });
        assert_eq!(helpers, 1, "no worker polled during the call");
        stops_within_10_s("a helper after the call", || {
            pool.helping.now.load(Ordering::Acquire) > 0
        });
    }

    /// With spinning off, no worker polls during a call, and calls still complete.
    #[test]
    fn no_worker_helps_with_spinning_off() {
        let mut pool = Pool::owned(2).unwrap();
        pool.spin = false;
        pool.install(|| std::thread::sleep(Duration::from_millis(20)));
        assert_eq!(sum_of_squares(&pool, 5000), expected(5000));
        assert_eq!(pool.helping.started.load(Ordering::Acquire), 0);
    }

    /// The global pool's handle is one, whoever asks.
    #[test]
    fn the_global_pool_is_shared() {
        assert!(Arc::ptr_eq(&Pool::global(), &Pool::global()));
        assert!(Pool::global().is_global());
        assert_eq!(sum_of_squares(&Pool::global(), 4000), expected(4000));
    }
}
