//! Parallel execution: the thread count a launch asks for, and how work is cut into tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rayon::{ThreadPool, ThreadPoolBuilder};

/// Fewest input bytes a parallel task should cover, so scheduling stays cheap.
pub(crate) const MIN_TASK_BYTES: usize = 32 * 1024;

/// Tasks per thread to aim for, so uneven tasks still balance.
const TASKS_PER_THREAD: usize = 4;

/// Runs `f`, whose kernels touch about `bytes` bytes, on a pool of `threads` threads (`0`:
/// the global rayon pool). Work too small to split runs on the calling thread: kernels
/// then make a single task, which rayon runs in place.
pub(crate) fn install<R: Send>(threads: usize, bytes: usize, f: impl FnOnce() -> R + Send) -> R {
    let single_task = bytes <= MIN_TASK_BYTES;
    if single_task || threads == 0 || threads == rayon::current_num_threads() {
        return f();
    }
    match pool(threads) {
        Some(p) => p.install(f),
        None => f(),
    }
}

fn pool(threads: usize) -> Option<Arc<ThreadPool>> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<ThreadPool>>>> = OnceLock::new();
    let pools = POOLS.get_or_init(Mutex::default);
    let mut pools = pools.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pools.get(&threads) {
        return Some(p.clone());
    }
    let p = Arc::new(ThreadPoolBuilder::new().num_threads(threads).build().ok()?);
    pools.insert(threads, p.clone());
    Some(p)
}

/// Runs `f(state, item)` for every item: the calling thread takes items too, next to one
/// task per other thread of the current pool, each participant pulling the next item from a
/// shared queue with its own `init()` state. Small launches then pay one wake-up, not a
/// hand-off to the pool and back.
pub(crate) fn share<I: Send, S>(
    items: Vec<I>,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, I) + Sync,
) {
    let helpers = rayon::current_num_threads()
        .min(items.len())
        .saturating_sub(1);
    let queue = Mutex::new(items.into_iter());
    let work = || {
        let mut state = init();
        loop {
            let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
            match next {
                Some(item) => f(&mut state, item),
                None => break,
            }
        }
    };
    rayon::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| work());
        }
        work();
    });
}

/// Items per task when `total` items of `item_bytes` bytes each are split over the current
/// pool: at least [`MIN_TASK_BYTES`] per task, and a few tasks per thread when there is
/// enough work.
pub(crate) fn chunk_len(total: usize, item_bytes: usize) -> usize {
    let min_items = MIN_TASK_BYTES.div_ceil(item_bytes.max(1));
    let tasks = rayon::current_num_threads() * TASKS_PER_THREAD;
    total.div_ceil(tasks.max(1)).max(min_items).max(1)
}
