//! Per-thread scratch memory that lives across kernel calls, so steady-state runs of
//! kernels that need temporary buffers (im2col tiles, pooling rows) allocate nothing.

use std::any::Any;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};

use bytemuck::Pod;

thread_local! {
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` elements of this thread's scratch memory (contents unspecified). A
/// nested call on the same thread gets a fresh buffer.
pub(crate) fn with_scratch<T: Pod, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let words = (len * size_of::<T>()).div_ceil(8);
    SCRATCH.with(|cell| {
        let mut fresh = Vec::new();
        let mut held = cell.try_borrow_mut().ok();
        let buf = held.as_deref_mut().unwrap_or(&mut fresh);
        if buf.len() < words {
            buf.resize(words, 0);
        }
        let all: &mut [T] = bytemuck::cast_slice_mut(&mut buf[..words]);
        f(&mut all[..len])
    })
}

thread_local! {
    static KEPT: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// A `T` taken from this thread's cache of kept values (or made with `T::default()` when
/// none is kept) and put back when dropped, so per-task scratch of parallel loops (buffers a
/// task grows as it needs) keeps its memory from call to call.
pub(crate) struct Kept<T: Default + 'static>(Option<Box<T>>);

impl<T: Default + 'static> Kept<T> {
    /// This thread's kept `T`, or a new one.
    pub(crate) fn take() -> Kept<T> {
        let found = KEPT.with(|cell| {
            let mut kept = cell.try_borrow_mut().ok()?;
            let i = kept.iter().position(|b| b.is::<T>())?;
            kept.swap_remove(i).downcast::<T>().ok()
        });
        Kept(Some(found.unwrap_or_default()))
    }
}

impl<T: Default + 'static> Deref for Kept<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_deref()
            .unwrap_or_else(|| unreachable!("present until dropped"))
    }
}

impl<T: Default + 'static> DerefMut for Kept<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("present until dropped"))
    }
}

impl<T: Default + 'static> Drop for Kept<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            KEPT.with(|cell| {
                if let Ok(mut kept) = cell.try_borrow_mut() {
                    kept.push(value);
                }
            });
        }
    }
}
