//! Filling buffers with one value.

use crate::parallel::for_each_chunk;

/// Sets every element of `dst` to `value`, in parallel for large buffers.
pub(super) fn fill_parallel<W: Copy + Send + Sync>(dst: &mut [W], value: W) {
    for_each_chunk(dst, |_, chunk| chunk.fill(value));
}
