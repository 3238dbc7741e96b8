//! Device memory: buffers, and a caching allocator that keeps released blocks for reuse so
//! that steady-state runs make no `cuMemAlloc` calls.
//!
//! A block released while kernels queued on a stream still use it may be handed out again at
//! once; that is safe when all users of the allocator queue their work on one stream, since
//! the stream orders the old work before the new. Work on several streams takes its memory
//! through a [`ScratchPool`]: while one is entered on a thread, that thread's allocations
//! reuse and return the pool's blocks, which go back to the shared cache only when the pool
//! is dropped (after its owner has waited for its work).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, result};

use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult, driver};

/// Allocation granularity: every block is a multiple of this many bytes (and so aligned for
/// any vector load).
const GRANULE: usize = 512;
/// Blocks up to this size are rounded to a power of two; larger ones to a multiple of it.
const LARGE: usize = 2 << 20;

/// A block of device memory. Buffers from a [`CachingAllocator`] go back to it on drop;
/// others are freed.
pub struct DeviceBuffer {
    ptr: u64,
    len: usize,
    capacity: usize,
    owner: Owner,
}

enum Owner {
    Cache(Arc<Cache>),
    Scratch(Arc<ScratchPool>),
    Device(Arc<CudaContext>),
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.ptr, self.len)
    }
}

impl DeviceBuffer {
    /// Allocates `len` bytes (contents undefined) straight from the driver, bypassing the
    /// cache.
    pub fn alloc(device: &CudaDevice, len: usize) -> CudaResult<DeviceBuffer> {
        let capacity = round_up(len);
        Ok(DeviceBuffer {
            ptr: raw_alloc(&device.inner.ctx, capacity)?,
            len,
            capacity,
            owner: Owner::Device(device.inner.ctx.clone()),
        })
    }

    /// The device address (`CUdeviceptr`).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes requested.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes actually reserved (at least `len`).
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        match &self.owner {
            Owner::Cache(cache) => cache.release(self.ptr, self.capacity),
            Owner::Scratch(pool) => pool.keep(self.ptr, self.capacity),
            Owner::Device(ctx) => raw_free(ctx, self.ptr),
        }
    }
}

/// The capacity the allocator reserves for a request of `len` bytes.
pub(crate) fn size_class(len: usize) -> usize {
    round_up(len)
}

fn round_up(len: usize) -> usize {
    let len = len.max(1);
    if len <= LARGE {
        len.next_power_of_two().max(GRANULE)
    } else {
        len.div_ceil(LARGE) * LARGE
    }
}

fn raw_alloc(ctx: &CudaContext, bytes: usize) -> CudaResult<u64> {
    ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
    // SAFETY: the device's context is current; the memory is owned by the returned buffer.
    unsafe { result::malloc_sync(bytes) }.map_err(|e| match driver("cuMemAlloc")(e) {
        CudaError::Driver { message, .. } => CudaError::Driver {
            call: "cuMemAlloc",
            message: format!("{bytes} bytes on cuda:{}: {message}", ctx.ordinal()),
        },
        other => other,
    })
}

fn raw_free(ctx: &CudaContext, ptr: u64) {
    if ctx.bind_to_thread().is_ok() {
        // SAFETY: `ptr` came from `raw_alloc` on this device and is freed once.
        let _ = unsafe { result::free_sync(ptr) };
    }
}

/// A per-device cache of freed blocks, keyed by their rounded size.
#[derive(Clone)]
pub struct CachingAllocator {
    cache: Arc<Cache>,
}

struct Cache {
    ctx: Arc<CudaContext>,
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    free: BTreeMap<usize, Vec<u64>>,
    held: usize,
    in_use: usize,
    driver_allocs: u64,
}

impl CachingAllocator {
    /// An empty cache for `device`.
    pub fn new(device: &CudaDevice) -> CachingAllocator {
        CachingAllocator {
            cache: Arc::new(Cache {
                ctx: device.inner.ctx.clone(),
                state: Mutex::new(CacheState::default()),
            }),
        }
    }

    /// A buffer of `len` bytes (contents undefined): a cached block of the same rounded size
    /// when there is one, else a new one from the driver. When the driver is out of memory
    /// the cache is emptied and the allocation retried once.
    ///
    /// While a [`ScratchPool`] of this allocator is entered on the calling thread, the
    /// buffer comes from that pool (or the cache when the pool has none of its size) and
    /// goes back to the pool on drop.
    pub fn alloc(&self, len: usize) -> CudaResult<DeviceBuffer> {
        let capacity = round_up(len);
        if let Some(pool) = ScratchPool::current(&self.cache) {
            let ptr = match pool.take(capacity) {
                Some(p) => p,
                None => self.alloc_block(capacity)?,
            };
            return Ok(DeviceBuffer {
                ptr,
                len,
                capacity,
                owner: Owner::Scratch(pool),
            });
        }
        Ok(DeviceBuffer {
            ptr: self.alloc_block(capacity)?,
            len,
            capacity,
            owner: Owner::Cache(self.cache.clone()),
        })
    }

    /// A new pool of blocks private to one user of this allocator (see [`ScratchPool`]).
    pub fn scratch_pool(&self) -> Arc<ScratchPool> {
        Arc::new(ScratchPool {
            cache: self.cache.clone(),
            free: Mutex::new(BTreeMap::new()),
        })
    }

    /// A block of `capacity` bytes (a size class) from the cache or the driver, counted in
    /// use.
    fn alloc_block(&self, capacity: usize) -> CudaResult<u64> {
        let reused = {
            let mut s = self.lock();
            let ptr = s.free.get_mut(&capacity).and_then(Vec::pop);
            if ptr.is_some() {
                s.held -= capacity;
                s.in_use += capacity;
            }
            ptr
        };
        let ptr = match reused {
            Some(p) => p,
            None => {
                let p = match raw_alloc(&self.cache.ctx, capacity) {
                    Ok(p) => p,
                    Err(_) => {
                        self.empty_cache()?;
                        raw_alloc(&self.cache.ctx, capacity)?
                    }
                };
                let mut s = self.lock();
                s.in_use += capacity;
                s.driver_allocs += 1;
                p
            }
        };
        Ok(ptr)
    }

    /// Bytes held by free blocks, ready for reuse.
    pub fn held_bytes(&self) -> usize {
        self.lock().held
    }

    /// Bytes in live buffers.
    pub fn in_use_bytes(&self) -> usize {
        self.lock().in_use
    }

    /// How many times the allocator has called `cuMemAlloc`.
    pub fn driver_allocations(&self) -> u64 {
        self.lock().driver_allocs
    }

    /// Waits for the device, then gives every free block back to the driver.
    pub fn empty_cache(&self) -> CudaResult<()> {
        let ctx = &self.cache.ctx;
        ctx.bind_to_thread().map_err(driver("cuCtxSetCurrent"))?;
        ctx.synchronize().map_err(driver("cuCtxSynchronize"))?;
        let blocks = {
            let mut s = self.lock();
            s.held = 0;
            std::mem::take(&mut s.free)
        };
        for ptr in blocks.into_values().flatten() {
            raw_free(&self.cache.ctx, ptr);
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.cache.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Cache {
    fn release(&self, ptr: u64, capacity: usize) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.in_use = s.in_use.saturating_sub(capacity);
        s.held += capacity;
        s.free.entry(capacity).or_default().push(ptr);
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for ptr in std::mem::take(&mut state.free).into_values().flatten() {
            raw_free(&self.ctx, ptr);
        }
    }
}

thread_local! {
    static ENTERED: RefCell<Vec<Arc<ScratchPool>>> = const { RefCell::new(Vec::new()) };
}

/// Device blocks owned by one user of a [`CachingAllocator`] (an execution context), so that
/// memory it releases while its queued work may still read it is never handed to work on
/// another stream. [`ScratchPool::enter`] routes the calling thread's allocations from the
/// allocator through the pool until the guard drops; a buffer allocated so returns to the
/// pool, whichever thread drops it. Dropping the pool gives its blocks to the shared cache:
/// its owner must have waited for the work using them first.
pub struct ScratchPool {
    cache: Arc<Cache>,
    free: Mutex<BTreeMap<usize, Vec<u64>>>,
}

impl std::fmt::Debug for ScratchPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScratchPool({} bytes free)", self.free_bytes())
    }
}

/// Leaves a [`ScratchPool`] entered by [`ScratchPool::enter`] on drop.
#[must_use = "the pool is left when the guard drops"]
pub struct ScratchGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl ScratchPool {
    /// Routes this thread's allocations from the pool's allocator through the pool until the
    /// guard drops (entered pools nest; the innermost one serves).
    pub fn enter(self: &Arc<Self>) -> ScratchGuard {
        self.enter_raw();
        ScratchGuard {
            _not_send: std::marker::PhantomData,
        }
    }

    /// [`ScratchPool::enter`] without a guard: the caller leaves with
    /// [`ScratchPool::leave_raw`] on the same thread.
    pub(crate) fn enter_raw(self: &Arc<Self>) {
        ENTERED.with(|e| e.borrow_mut().push(self.clone()));
    }

    /// Leaves the pool this thread entered last.
    pub(crate) fn leave_raw() {
        ENTERED.with(|e| e.borrow_mut().pop());
    }

    /// Bytes of free blocks the pool keeps.
    pub fn free_bytes(&self) -> usize {
        self.lock().iter().map(|(cap, v)| cap * v.len()).sum()
    }

    fn current(cache: &Arc<Cache>) -> Option<Arc<ScratchPool>> {
        ENTERED.with(|e| {
            e.borrow()
                .iter()
                .rev()
                .find(|p| Arc::ptr_eq(&p.cache, cache))
                .cloned()
        })
    }

    fn take(&self, capacity: usize) -> Option<u64> {
        self.lock().get_mut(&capacity).and_then(Vec::pop)
    }

    fn keep(&self, ptr: u64, capacity: usize) {
        self.lock().entry(capacity).or_default().push(ptr);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Vec<u64>>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        ScratchPool::leave_raw();
    }
}

impl Drop for ScratchPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (capacity, ptrs) in free {
            for ptr in ptrs {
                self.cache.release(ptr, capacity);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::round_up;

    #[test]
    fn sizes_round_to_classes() {
        assert_eq!(round_up(0), 512);
        assert_eq!(round_up(513), 1024);
        assert_eq!(round_up(3 << 20), 4 << 20);
        assert_eq!(round_up((4 << 20) + 1), 6 << 20);
    }
}
