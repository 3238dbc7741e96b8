//! The product with a packed constant right operand ([`super::PackedRhs`]) on CPUs with
//! AVX2 and FMA but no AVX-512: the weights' strips of [`COLS`] columns meet the left
//! operand's rows, read in place, in [`super::packed_avx2`]'s register tiles (four rows ×
//! 24 columns). Every row panel of a task passes over one strip's block of at most [`KC`]
//! steps (24 KiB, in L1) before the next block; the partial sums wait in the output between
//! blocks, and the bias starts the first. The weights are read once per run, mostly from
//! memory, so each panel call first asks L2 for its share of the block that comes next.

use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};

use rayon::prelude::*;

use super::packed::{MR, Start};
use super::packed_avx2::{self, COLS, Panel};
use super::packed_rhs::{Finish, SendPtr};

/// Most inner steps of one block: a strip's block of `KC × COLS` values (24 KiB) stays in
/// Zen 3's 32 KiB L1 beside the rows' values.
const KC: usize = 256;
/// f32 values in one cache line.
const LINE: usize = 16;
/// Tasks per thread, so that a thread slowed by other work hands its share to the others.
const TASKS_PER_THREAD: usize = 4;

/// One call: `epilogue(a · B + bias + residual)` for `rows` rows of `a` (row `i` at
/// `a[i · lda..]`).
pub(super) struct Product<'a> {
    /// `B` packed into strips of [`COLS`] columns, `[strip][k][COLS]`.
    pub(super) weights: &'a [f32],
    pub(super) depth: usize,
    pub(super) cols: usize,
    pub(super) a: &'a [f32],
    pub(super) lda: usize,
    pub(super) rows: usize,
    pub(super) finish: Finish<'a>,
}

impl Product<'_> {
    /// Writes the product into `out` (`rows × cols`, row-major) on up to `threads` workers.
    /// The caller has checked the sizes: `weights` holds every strip, `a` every row
    /// (`lda ≥ depth`), the bias `cols` values and the residual `out`'s; `rows > 0`.
    pub(super) fn run(&self, out: &mut [f32], threads: usize) -> Result<(), String> {
        let strips = self.cols.div_ceil(COLS);
        if self.weights.len() != strips * self.depth * COLS || out.len() != self.rows * self.cols {
            return Err("packed product: the weights or the output do not fit".into());
        }
        if !crate::simd::v3() {
            return Err("packed product: this CPU lacks AVX2".into());
        }
        let panels = self.rows.div_ceil(MR);
        let wanted = threads.max(1) * TASKS_PER_THREAD;
        let groups = wanted.div_ceil(strips).min(panels);
        let units = strips * groups;
        let tasks = units.min(wanted);
        let out = SendPtr(out.as_mut_ptr());
        let run = |t: usize| {
            for unit in units * t / tasks..units * (t + 1) / tasks {
                let (strip, group) = (unit / groups, unit % groups);
                let first = panels * group / groups;
                let last = panels * (group + 1) / groups;
                // SAFETY: units cover disjoint row panels × strips of the output, `v3()`
                // holds and the caller checked the operands' sizes.
                unsafe { self.unit(strip, first..last, out) };
            }
        };
        if tasks == 1 {
            run(0);
        } else {
            (0..tasks).into_par_iter().for_each(run);
        }
        Ok(())
    }

    /// Row panels `panels` of strip `strip`, block after block of the depth.
    ///
    /// # Safety
    /// As [`Product::run`] checks; the output's tiles of `panels` × `strip` are this call's.
    unsafe fn unit(&self, strip: usize, panels: std::ops::Range<usize>, out: SendPtr) {
        let Finish {
            bias,
            residual,
            epilogue,
        } = self.finish;
        let (depth, cols) = (self.depth, self.cols);
        let blocks = depth.div_ceil(KC);
        let kc = depth.div_ceil(blocks);
        let j0 = strip * COLS;
        let base = strip * depth * COLS;
        let count = panels.len().max(1);
        for block in 0..blocks {
            let k0 = block * kc;
            let steps = kc.min(depth - k0);
            let next = base + (k0 + steps) * COLS;
            let ahead = &self.weights[next.min(self.weights.len())..];
            let ahead = &ahead[..(kc * COLS).min(ahead.len())];
            let share = ahead.len().div_ceil(count).next_multiple_of(LINE);
            for (n, p) in panels.clone().enumerate() {
                let mine = &ahead[(n * share).min(ahead.len())..];
                for line in mine[..share.min(mine.len())].chunks(LINE) {
                    // SAFETY: a prefetch of an address inside `weights`.
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast()) };
                }
                let r0 = p * MR;
                let at = r0 * cols + j0;
                let panel = Panel {
                    a: self.a[r0 * self.lda + k0..].as_ptr(),
                    a_rows: self.lda,
                    a_steps: 1,
                    b: self.weights[base + k0 * COLS..].as_ptr(),
                    ldb: COLS,
                    kc: steps,
                    c: out.at(at),
                    ldc: cols,
                    rows: MR.min(self.rows - r0),
                    width: COLS.min(cols - j0),
                    start: match (block, bias) {
                        (0, Some(b)) => Start::Columns(b[j0..].as_ptr()),
                        (0, None) => Start::Zero,
                        _ => Start::Dst,
                    },
                    finish: (block + 1 == blocks)
                        .then(|| (epilogue, residual.map(|r| r[at..].as_ptr()))),
                };
                // SAFETY: the panel's rows of `a` hold `steps` values from `k0`, the strip
                // holds `steps` rows of `COLS` from `k0`, and the tile of `out` (and of the
                // residual, laid out alike) is this call's (the contract).
                unsafe { packed_avx2::panel(&panel) };
            }
        }
    }
}
