//! The product with a packed constant right operand ([`super::PackedRhs`]) on CPUs with
//! AVX2 and FMA but no AVX-512: the weights' strips of [`COLS`] columns meet the left
//! operand's rows, read in place, in [`super::packed_avx2`]'s register tiles (four rows ×
//! 24 columns). The depth is cut into blocks of at most [`KC`] steps. Every row panel of a
//! task passes over one strip's block (24 KiB, in L1) before the next; a task takes all its
//! strips through a few blocks ([`ROWS_BYTES`] of the rows, in L2) before the next blocks,
//! the partial sums waiting in the output, so that the rows are not read again from L3 for
//! each strip. The bias starts the first block. The weights are read once per run, mostly
//! from memory: they are packed block by block (`[block][strip][k][COLS]`, [`step_offset`]),
//! so a task reads them in one sweep, and each panel call first asks L2 for its share of the
//! block that comes next.

use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
use std::ops::Range;

use rayon::prelude::*;

use super::packed::{MR, Start};
use super::packed_avx2::{self, COLS, Panel};
use super::packed_rhs::{Finish, SendPtr};

/// Most inner steps of one block: a strip's block of `KC × COLS` values (24 KiB) stays in
/// Zen 3's 32 KiB L1 beside the rows' values.
const KC: usize = 256;
/// Most bytes of the left operand's rows a task's strips pass over before the next blocks
/// (of a 512 KiB L2, which the weights stream through).
const ROWS_BYTES: usize = 192 * 1024;
/// f32 values in one cache line.
const LINE: usize = 16;
/// Tasks per thread, so that a thread slowed by other work hands its share to the others.
const TASKS_PER_THREAD: usize = 4;

/// The blocks of a depth: how many, and the steps of each but the last (equal blocks of at
/// most [`KC`] steps: 300 steps are two of 150, not 256 + 44).
fn blocks(depth: usize) -> (usize, usize) {
    let blocks = depth.div_ceil(KC);
    (blocks, depth.div_ceil(blocks.max(1)))
}

/// Where step `k` of strip `strip` starts in weights of `depth` steps and `strips` strips
/// packed block-major: the depth's blocks ([`blocks`]) one after another, each holding
/// every strip's steps of that block in turn.
pub(super) fn step_offset(depth: usize, strips: usize, k: usize, strip: usize) -> usize {
    let (_, kc) = blocks(depth);
    let k0 = k / kc * kc;
    let steps = kc.min(depth - k0);
    k0 * strips * COLS + (strip * steps + k - k0) * COLS
}

/// One call: `epilogue(a · B + bias + residual)` for `rows` rows of `a` (row `i` at
/// `a[i · lda..]`).
pub(super) struct Product<'a> {
    /// `B` packed into strips of [`COLS`] columns, block-major ([`step_offset`]).
    pub(super) weights: &'a [f32],
    pub(super) depth: usize,
    pub(super) cols: usize,
    pub(super) a: &'a [f32],
    pub(super) lda: usize,
    pub(super) rows: usize,
    pub(super) finish: Finish<'a>,
}

/// How a call is cut: blocks of the depth, groups of row panels, and units (a strip of
/// one group), `units` in `tasks` runs of consecutive units.
struct Plan {
    blocks: usize,
    kc: usize,
    /// Blocks a task's units pass through before the next ones.
    chunk: usize,
    panels: usize,
    groups: usize,
    strips: usize,
    tasks: usize,
}

impl Plan {
    fn units(&self) -> usize {
        self.strips * self.groups
    }

    /// The strip and row panels of unit `u`: units run strip after strip within a group.
    fn unit(&self, u: usize) -> (usize, Range<usize>) {
        let (group, strip) = (u / self.strips, u % self.strips);
        let first = self.panels * group / self.groups;
        (strip, first..self.panels * (group + 1) / self.groups)
    }
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
        let (blocks, kc) = blocks(self.depth);
        let panels = self.rows.div_ceil(MR);
        let block_bytes = |panels: usize| panels * MR * kc * size_of::<f32>();
        let wanted = threads.max(1) * TASKS_PER_THREAD;
        let fitting = panels.div_ceil((ROWS_BYTES / block_bytes(1)).max(1));
        let groups = wanted.div_ceil(strips).max(fitting).min(panels);
        let chunk = (ROWS_BYTES / block_bytes(panels.div_ceil(groups))).clamp(1, blocks);
        let plan = Plan {
            blocks,
            kc,
            chunk,
            panels,
            groups,
            strips,
            tasks: (strips * groups).min(wanted),
        };
        let out = SendPtr(out.as_mut_ptr());
        let run = |t: usize| {
            let units = plan.units();
            // SAFETY: tasks cover disjoint units (row panels × strips) of the output,
            // `v3()` holds and the caller checked the operands' sizes.
            unsafe {
                self.task(
                    &plan,
                    units * t / plan.tasks..units * (t + 1) / plan.tasks,
                    out,
                )
            };
        };
        if plan.tasks == 1 {
            run(0);
        } else {
            (0..plan.tasks).into_par_iter().for_each(run);
        }
        Ok(())
    }

    /// Units `units`, a chunk of blocks at a time.
    ///
    /// # Safety
    /// As [`Product::run`] checks; the output's tiles of `units` are this call's.
    unsafe fn task(&self, plan: &Plan, units: Range<usize>, out: SendPtr) {
        let block_at = |u: usize, block: usize| {
            let (strip, _) = plan.unit(u);
            step_offset(self.depth, plan.strips, block * plan.kc, strip)
        };
        for first in (0..plan.blocks).step_by(plan.chunk) {
            let end = (first + plan.chunk).min(plan.blocks);
            for u in units.clone() {
                for block in first..end {
                    let next = if block + 1 < end {
                        Some(block_at(u, block + 1))
                    } else if u + 1 < units.end {
                        Some(block_at(u + 1, first))
                    } else {
                        (end < plan.blocks).then(|| block_at(units.start, end))
                    };
                    let (strip, panels) = plan.unit(u);
                    // SAFETY: forwarded (the unit is this task's).
                    unsafe { self.block(plan, strip, panels, block, next, out) };
                }
            }
        }
    }

    /// Block `block` of the depth for row panels `panels` of strip `strip`; `next` is where
    /// the task's next block of weights starts.
    ///
    /// # Safety
    /// As [`Product::task`], for this unit.
    unsafe fn block(
        &self,
        plan: &Plan,
        strip: usize,
        panels: Range<usize>,
        block: usize,
        next: Option<usize>,
        out: SendPtr,
    ) {
        let Finish {
            bias,
            residual,
            epilogue,
        } = self.finish;
        let (depth, cols) = (self.depth, self.cols);
        let k0 = block * plan.kc;
        let steps = plan.kc.min(depth - k0);
        let j0 = strip * COLS;
        let ahead = next.map_or(&[][..], |at| &self.weights[at.min(self.weights.len())..]);
        let ahead = &ahead[..(plan.kc * COLS).min(ahead.len())];
        let share = ahead
            .len()
            .div_ceil(panels.len().max(1))
            .next_multiple_of(LINE);
        for (n, p) in panels.enumerate() {
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
                b: self.weights[step_offset(depth, plan.strips, k0, strip)..].as_ptr(),
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
                finish: (block + 1 == plan.blocks)
                    .then(|| (epilogue, residual.map(|r| r[at..].as_ptr()))),
            };
            // SAFETY: the panel's rows of `a` hold `steps` values from `k0`, the strip
            // holds `steps` rows of `COLS` from `k0`, and the tile of `out` (and of the
            // residual, laid out alike) is this call's (the contract).
            unsafe { packed_avx2::panel(&panel) };
        }
    }
}
