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

/// Runs `f(first_row, chunk)` over chunks of whole rows of `out` (`row_len` elements each),
/// in parallel tasks of at least [`MIN_TASK`] units of `work_per_row` when there is enough
/// work; `first_row` is the index of the chunk's first row.
pub(crate) fn for_each_rows<T: Send>(
    out: &mut [T],
    row_len: usize,
    work_per_row: usize,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if row_len == 0 || out.is_empty() {
        return;
    }
    let rows = out.len() / row_len;
    let threads = rayon::current_num_threads();
    let rows_per_task = (MIN_TASK / work_per_row.max(1))
        .max(rows.div_ceil(threads * 4))
        .max(1);
    if rows <= rows_per_task || threads == 1 {
        f(0, out);
        return;
    }
    out.par_chunks_mut(rows_per_task * row_len)
        .enumerate()
        .for_each(|(task, chunk)| f(task * rows_per_task, chunk));
}

/// How many parts to split each of `rows` reductions of `count` elements into so that
/// every thread gets work: 1 when there are enough rows, else enough parts for about four
/// tasks per thread, each of at least [`MIN_TASK`] elements.
pub(crate) fn split_parts(rows: usize, count: usize) -> usize {
    let threads = rayon::current_num_threads();
    if threads == 1 || rows >= threads * 8 || rows == 0 {
        return 1;
    }
    (threads * 4).div_ceil(rows).min(count / MIN_TASK).max(1)
}
