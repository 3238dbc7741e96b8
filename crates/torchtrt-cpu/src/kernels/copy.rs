//! Element moves shared by the data-movement kernels.

use rayon::prelude::*;

use crate::parallel::{MIN_TASK, for_each_chunk};
use crate::strided::Strided;

/// Side of the square tiles of a blocked transpose.
const TILE: usize = 16;

/// Copies `src` into `dst` (equal lengths), in parallel for large buffers.
pub(super) fn copy_parallel<W: Copy + Send + Sync>(src: &[W], dst: &mut [W]) {
    for_each_chunk(dst, |start, chunk| {
        chunk.copy_from_slice(&src[start..start + chunk.len()]);
    });
}

/// Fills the dense `dst` with `src` read along `walk`.
pub(super) fn strided_copy<W: Copy + Send + Sync>(walk: &Strided<1>, src: &[W], dst: &mut [W]) {
    if dst.is_empty() {
        return;
    }
    if let Some(t) = Transposes::of(walk) {
        t.copy(src, dst);
        return;
    }
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

/// A walk that is a batch of 2-D transposes: output `[batch…, rows, cols]` where element
/// `(b, r, c)` reads `src[batch[b] + r + c · col_stride]`. Done in square tiles so reads
/// and writes both stay in cache.
struct Transposes {
    batch: Vec<usize>,
    rows: usize,
    cols: usize,
    col_stride: usize,
}

impl Transposes {
    fn of(walk: &Strided<1>) -> Option<Transposes> {
        let (dims, strides, [base]) = walk.dims();
        let r = dims.len();
        if r < 2 || strides[r - 2][0] != 1 || strides[r - 1][0] <= 1 || dims[r - 2] < TILE {
            return None;
        }
        let mut batch = vec![base as usize];
        for (&d, &[s]) in dims[..r - 2].iter().zip(strides) {
            batch = batch
                .iter()
                .flat_map(|&b| (0..d).map(move |i| (b as isize + i as isize * s) as usize))
                .collect();
        }
        Some(Transposes {
            batch,
            rows: dims[r - 2],
            cols: dims[r - 1],
            col_stride: strides[r - 1][0] as usize,
        })
    }

    fn copy<W: Copy + Send + Sync>(&self, src: &[W], dst: &mut [W]) {
        let total_rows = self.batch.len() * self.rows;
        let threads = rayon::current_num_threads();
        let band = (MIN_TASK / self.cols.max(1))
            .max(total_rows.div_ceil(threads * 4))
            .next_multiple_of(TILE);
        let work = |(i, out): (usize, &mut [W])| self.band(src, i * band, out);
        if total_rows <= band || threads == 1 {
            work((0, dst));
        } else {
            dst.par_chunks_mut(band * self.cols)
                .enumerate()
                .for_each(work);
        }
    }

    /// Writes the output rows from global row `first` on into `out`.
    fn band<W: Copy>(&self, src: &[W], first: usize, out: &mut [W]) {
        match self.cols {
            2 => return self.narrow::<2, W>(src, first, out),
            3 => return self.narrow::<3, W>(src, first, out),
            4 => return self.narrow::<4, W>(src, first, out),
            _ => {}
        }
        let rows = out.len() / self.cols;
        let origin = |g: usize| self.batch[g / self.rows] + g % self.rows;
        let vector = size_of::<W>() == 4 && crate::simd::v4();
        for r0 in (0..rows).step_by(TILE) {
            let r1 = (r0 + TILE).min(rows);
            let at = origin(first + r0);
            let whole_rows = r1 - r0 == TILE && origin(first + r1 - 1) == at + TILE - 1;
            for c0 in (0..self.cols).step_by(TILE) {
                let c1 = (c0 + TILE).min(self.cols);
                let last = at + TILE - 1 + (c1 - 1) * self.col_stride;
                if vector && whole_rows && c1 - c0 == TILE && last < src.len() {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: AVX-512 checked; the tile's source ends at `last`, inside
                    // `src`; its sixteen output rows of sixteen are inside `out`; `W` is
                    // four bytes, moved as bits.
                    unsafe {
                        super::transpose_tile::transpose16(
                            src[at + c0 * self.col_stride..].as_ptr().cast(),
                            self.col_stride,
                            out[r0 * self.cols + c0..].as_mut_ptr().cast(),
                            self.cols,
                        );
                    }
                    continue;
                }
                for r in r0..r1 {
                    let at = origin(first + r);
                    let line = &mut out[r * self.cols + c0..r * self.cols + c1];
                    for (c, v) in (c0..c1).zip(line) {
                        *v = src[at + c * self.col_stride];
                    }
                }
            }
        }
    }

    /// [`Self::band`] of `C` columns (an image's few channels moved last): each run of rows
    /// inside one batch entry interleaves `C` contiguous source lines.
    fn narrow<const C: usize, W: Copy>(&self, src: &[W], first: usize, out: &mut [W]) {
        let rows = out.len() / C;
        let mut r = 0;
        while r < rows {
            let (entry, row) = ((first + r) / self.rows, (first + r) % self.rows);
            let len = (self.rows - row).min(rows - r);
            let at = self.batch[entry] + row;
            let lines: [&[W]; C] = std::array::from_fn(|c| {
                let start = at + c * self.col_stride;
                &src[start..start + len]
            });
            for (i, o) in out[r * C..(r + len) * C].chunks_exact_mut(C).enumerate() {
                for (v, line) in o.iter_mut().zip(&lines) {
                    *v = line[i];
                }
            }
            r += len;
        }
    }
}
