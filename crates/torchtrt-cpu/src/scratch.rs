//! Per-thread scratch memory that lives across kernel calls, so steady-state runs of
//! kernels that need temporary buffers (im2col tiles) allocate nothing.

use std::cell::RefCell;

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
