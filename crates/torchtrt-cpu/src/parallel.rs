//! Splitting output buffers into parallel tasks of a useful size.

use rayon::prelude::*;

/// The least work (in elements touched) worth a task of its own.
pub(crate) const MIN_TASK: usize = 16 * 1024;

/// Runs `f(start, chunk)` over consecutive chunks of `out`, in parallel when `out` holds more
/// than [`MIN_TASK`] elements; `start` is the chunk's offset in `out`.
pub(crate) fn for_each_chunk<T: Send>(out: &mut [T], f: impl Fn(usize, &mut [T]) + Sync + Send) {
    let n = out.len();
    let threads = rayon::current_num_threads();
    if n <= MIN_TASK || threads == 1 {
        f(0, out);
        return;
    }
    let chunk = n.div_ceil(threads * 4).max(MIN_TASK);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(i, c)| f(i * chunk, c));
}

/// Runs `f(scratch, row, out_row)` for each row of `row_len` elements of `out`, grouping rows
/// into tasks of at least [`MIN_TASK`] units of `work_per_row`; each task gets one scratch
/// value from `init`.
pub(crate) fn for_each_row<T: Send, S>(
    out: &mut [T],
    row_len: usize,
    work_per_row: usize,
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &mut [T]) + Sync + Send,
) {
    if row_len == 0 {
        return;
    }
    let rows = out.len() / row_len;
    let threads = rayon::current_num_threads();
    let rows_per_task = (MIN_TASK / work_per_row.max(1))
        .max(rows.div_ceil(threads * 4))
        .max(1);
    let run = |scratch: &mut S, task: usize, chunk: &mut [T]| {
        for (j, row) in chunk.chunks_exact_mut(row_len).enumerate() {
            f(scratch, task * rows_per_task + j, row);
        }
    };
    if rows <= rows_per_task || threads == 1 {
        run(&mut init(), 0, out);
        return;
    }
    out.par_chunks_mut(rows_per_task * row_len)
        .enumerate()
        .for_each_init(&init, |scratch, (task, chunk)| run(scratch, task, chunk));
}
