//! Element moves shared by the data-movement kernels.

use crate::parallel::for_each_chunk;
use crate::strided::Strided;

/// Copies `src` into `dst` (equal lengths), in parallel for large buffers.
pub(super) fn copy_parallel<W: Copy + Send + Sync>(src: &[W], dst: &mut [W]) {
    for_each_chunk(dst, |start, chunk| {
        chunk.copy_from_slice(&src[start..start + chunk.len()]);
    });
}

/// Fills the dense `dst` with `src` read along `walk`.
pub(super) fn strided_copy<W: Copy + Send + Sync>(walk: &Strided<1>, src: &[W], dst: &mut [W]) {
    let [step] = walk.inner_strides();
    for_each_chunk(dst, |start, chunk| {
        walk.for_each_run(start, start + chunk.len(), |o, [at], len| {
            let run = &mut chunk[o - start..o - start + len];
            if step == 1 {
                run.copy_from_slice(&src[at..at + len]);
            } else {
                for (j, v) in run.iter_mut().enumerate() {
                    *v = src[(at as isize + j as isize * step) as usize];
                }
            }
        });
    });
}
