//! Scratch memory that lives across kernel calls, so steady-state runs of kernels that need
//! temporary buffers (im2col tiles, pooling rows, padded images) allocate nothing.
//!
//! A task of a parallel loop keeps its buffers on its thread ([`with_scratch`],
//! [`Kept::take`]). A layer's call keeps the buffers it takes before splitting into tasks
//! on one shelf for the whole process ([`Kept::shared`]): the worker that runs a call
//! changes from run to run, and a copy per thread would be allocated once per worker, when
//! work stealing first hands it the call.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

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

/// A kept value waiting for its next use: what it is for, and the value.
type Shelved = (&'static str, Box<dyn Any + Send>);

thread_local! {
    static THREAD_SHELF: RefCell<Vec<Shelved>> = const { RefCell::new(Vec::new()) };
}

static SHARED_SHELF: Mutex<Vec<Shelved>> = Mutex::new(Vec::new());

/// Which shelf a [`Kept`] value goes back to.
#[derive(Clone, Copy)]
enum Shelf {
    Thread,
    Shared,
}

impl Shelf {
    fn with<R>(self, f: impl FnOnce(&mut Vec<Shelved>) -> R) -> Option<R> {
        match self {
            Shelf::Thread => THREAD_SHELF.with(|cell| Some(f(&mut *cell.try_borrow_mut().ok()?))),
            Shelf::Shared => Some(f(&mut *SHARED_SHELF.lock().ok()?)),
        }
    }
}

/// A `T` kept for one use (`what`), taken from a shelf (or made with `T::default()` when
/// none is there) and put back when dropped, so scratch a kernel grows as it needs keeps its
/// memory from call to call. Values kept for different uses never trade places, so one use
/// never finds a smaller buffer another left and grows it again.
pub(crate) struct Kept<T: Default + Send + 'static> {
    value: Option<Box<T>>,
    what: &'static str,
    shelf: Shelf,
}

impl<T: Default + Send + 'static> Kept<T> {
    /// This thread's `T` kept for `what`, or a new one: for the tasks of a parallel loop.
    pub(crate) fn take(what: &'static str) -> Kept<T> {
        Kept::take_from(Shelf::Thread, what)
    }

    /// A `T` kept for `what` on the process's shelf, or a new one: for a layer's call, whose
    /// thread work stealing picks. Concurrent calls each get their own.
    pub(crate) fn shared(what: &'static str) -> Kept<T> {
        Kept::take_from(Shelf::Shared, what)
    }

    fn take_from(shelf: Shelf, what: &'static str) -> Kept<T> {
        let found = shelf.with(|kept| {
            let i = kept
                .iter()
                .position(|(w, v)| *w == what && (**v).type_id() == TypeId::of::<T>())?;
            kept.swap_remove(i).1.downcast::<T>().ok()
        });
        Kept {
            value: Some(found.flatten().unwrap_or_default()),
            what,
            shelf,
        }
    }
}

impl<T: Default + Send + 'static> Deref for Kept<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value
            .as_deref()
            .unwrap_or_else(|| unreachable!("present until dropped"))
    }
}

impl<T: Default + Send + 'static> DerefMut for Kept<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("present until dropped"))
    }
}

impl<T: Default + Send + 'static> Drop for Kept<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            let what = self.what;
            self.shelf.with(|kept| kept.push((what, value)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_values_go_back_to_their_own_use() {
        let what = "kept_values_go_back_to_their_own_use";
        {
            let mut big = Kept::<Vec<f32>>::shared(what);
            big.resize(1000, 1.0);
            let mut small = Kept::<Vec<f32>>::shared("another use");
            small.resize(10, 2.0);
        }
        {
            let small = Kept::<Vec<f32>>::shared("another use");
            let big = Kept::<Vec<f32>>::shared(what);
            assert_eq!((big.len(), small.len()), (1000, 10));
        }
        let on_another_thread = std::thread::spawn(move || Kept::<Vec<f32>>::shared(what).len());
        assert_eq!(on_another_thread.join().ok(), Some(1000));
        assert!(
            Kept::<Vec<f32>>::take(what).is_empty(),
            "this thread's shelf is apart"
        );
    }

    #[test]
    fn concurrent_takes_get_their_own_values() {
        let what = "concurrent_takes_get_their_own_values";
        let mut first = Kept::<Vec<u8>>::shared(what);
        first.push(1);
        let second = Kept::<Vec<u8>>::shared(what);
        assert!(second.is_empty());
    }
}
