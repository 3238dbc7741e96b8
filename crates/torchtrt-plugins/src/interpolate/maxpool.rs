//! A direct kernel for two-dimensional adaptive max pooling (the separable engine's tap
//! tables cost a bounds-checked gather per tap): for each output row, the input rows of its
//! window are reduced lane by lane into one row of `f32` maxima (contiguous slices, which
//! vectorise), then each column window of that row is reduced. A `1×1` output is a
//! lane-wise maximum over the whole plane. NaN wins, as in PyTorch.

use std::ops::Range;

use torchtrt_plugin_api::Tactic;

use super::element::{f32_view, store};
#[cfg(target_arch = "x86_64")]
use super::maxpool_x86;
use crate::kernels::float::Float;
use crate::kernels::simd::multiversion;

/// Lanes of the accumulators of [`plane_max`].
const LANES: usize = 64;
/// Columns reduced at a time, in registers, by [`lanes`].
const BLOCK: usize = 16;

/// `max(a, b)` where a NaN in either operand wins.
#[inline(always)]
pub(super) fn max_nan(a: f32, b: f32) -> f32 {
    if b > a || b.is_nan() { b } else { a }
}

/// [`max_nan`] when `N`, else the plain maximum (one instruction), for data known to hold
/// no NaN.
#[inline(always)]
fn mx<const N: bool>(a: f32, b: f32) -> f32 {
    if N {
        max_nan(a, b)
    } else if b > a {
        b
    } else {
        a
    }
}

/// The maximum of `win` (not empty), over four independent chains.
#[inline(always)]
fn window_max<const N: bool>(win: &[f32]) -> f32 {
    let mut m = [win[0]; 4];
    let mut chunks = win.chunks_exact(4);
    for c in chunks.by_ref() {
        for (m, &x) in m.iter_mut().zip(c) {
            *m = mx::<N>(*m, x);
        }
    }
    for (m, &x) in m.iter_mut().zip(chunks.remainder()) {
        *m = mx::<N>(*m, x);
    }
    mx::<N>(mx::<N>(m[0], m[1]), mx::<N>(m[2], m[3]))
}

/// The adaptive windows of one axis: output `i` covers `[floor(i·in/out), ceil((i+1)·in/out))`.
fn windows(input: usize, output: usize) -> Vec<Range<usize>> {
    (0..output)
        .map(|i| i * input / output..((i + 1) * input).div_ceil(output))
        .collect()
}

/// The windows of a two-dimensional adaptive max pool.
pub struct MaxPool2dPlan {
    rows: Vec<Range<usize>>,
    cols: Vec<Range<usize>>,
    width: usize,
    /// Every column window has this many inputs and they tile the row (`0`: not so).
    factor: usize,
    /// The shortest column window's length `s` when every window is at most `2s` long, so
    /// its maximum is that of its first and last `s` inputs (`0`: not so).
    slide: usize,
    /// Every row window spans at least three rows.
    tall: bool,
    /// The AVX-512 kernel for narrow rows whose column windows do not tile the row (tiling
    /// windows reduce as fast in [`row_k`]), when the CPU runs it.
    #[cfg(target_arch = "x86_64")]
    narrow: Option<maxpool_x86::NarrowRows>,
}

/// Tactic: rows first, then each column window as the maximum of its first and last `s`
/// inputs (when every window is at most twice the shortest) or of the tiles it covers.
pub const TACTIC_SLIDING: u32 = 1;
/// Tactic: rows first, then every column window reduced input by input.
pub const TACTIC_WINDOWS: u32 = 2;
/// Tactic: the AVX-512 kernel for narrow rows.
pub const TACTIC_NARROW: u32 = 3;

impl MaxPool2dPlan {
    /// The plan for input `[h, w]` and output `[oh, ow]` (all ≥ 1), with the implementation
    /// `tactic` picks when it applies to these sizes (`0`, or one that does not: the
    /// fastest by rule).
    pub fn new(input: [usize; 2], output: [usize; 2], tactic: u32) -> MaxPool2dPlan {
        let mut plan = MaxPool2dPlan::by_rule(input, output);
        #[cfg(target_arch = "x86_64")]
        if matches!(tactic, TACTIC_SLIDING | TACTIC_WINDOWS) {
            plan.narrow = None;
        }
        if tactic == TACTIC_WINDOWS {
            plan.slide = 0;
        }
        plan
    }

    /// The implementations that differ for these sizes, for the builder to time: none
    /// when only one applies.
    pub fn tactics(input: [usize; 2], output: [usize; 2]) -> Vec<Tactic> {
        let plan = MaxPool2dPlan::by_rule(input, output);
        let mut tactics = Vec::new();
        if plan.slide != 0 && plan.factor == 0 {
            tactics.push(Tactic::new(TACTIC_SLIDING, "sliding-halves"));
        }
        #[cfg(target_arch = "x86_64")]
        if plan.narrow.is_some() {
            tactics.push(Tactic::new(TACTIC_NARROW, "avx512-narrow-rows"));
        }
        if !tactics.is_empty() {
            tactics.push(Tactic::new(TACTIC_WINDOWS, "windows"));
        }
        tactics
    }

    /// The plan the rules choose: the narrow-row kernel where it runs, sliding halves where
    /// windows allow.
    fn by_rule(input: [usize; 2], output: [usize; 2]) -> MaxPool2dPlan {
        let factor = if input[1].is_multiple_of(output[1]) {
            input[1] / output[1]
        } else {
            0
        };
        let cols = windows(input[1], output[1]);
        let shortest = cols.iter().map(Range::len).min().unwrap_or(0);
        let longest = cols.iter().map(Range::len).max().unwrap_or(0);
        let slide = if shortest >= 2 && longest <= 2 * shortest {
            shortest
        } else {
            0
        };
        let rows = windows(input[0], output[0]);
        let tall = rows.iter().all(|r| r.len() >= 3);
        #[cfg(target_arch = "x86_64")]
        let narrow = if factor == 0 {
            maxpool_x86::NarrowRows::new(input[1], &cols)
        } else {
            None
        };
        MaxPool2dPlan {
            rows,
            tall,
            cols,
            width: input[1],
            factor,
            slide,
            #[cfg(target_arch = "x86_64")]
            narrow,
        }
    }

    /// Pools the plane `src` into `dst`: output rows `outer`, all columns.
    pub fn plane<T: Float>(
        &self,
        src: &[T],
        outer: Range<usize>,
        dst: &mut [T],
        widened: &mut Vec<f32>,
        acc: &mut Vec<f32>,
    ) {
        let (w, ow) = (self.width, self.cols.len());
        if outer.is_empty() || w == 0 || ow == 0 {
            return;
        }
        let lo = self.rows[outer.start].start;
        let hi = self.rows[outer.end - 1].end;
        let src = f32_view(&src[lo * w..hi * w], widened);
        if self.rows.len() == 1 && ow == 1 {
            store(&[plane_max(src)], &mut dst[..1]);
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(narrow) = &self.narrow {
            if acc.len() < 2 * w + outer.len() * ow {
                acc.resize(2 * w + outer.len() * ow, 0.0);
            }
            let (scratch, out) = acc.split_at_mut(2 * w);
            let out = &mut out[..outer.len() * ow];
            let (cols, slide) = (&self.cols, self.slide);
            narrow.pool_rows(src, lo, &self.rows[outer], out, |window, out| {
                row_k::<true>(window, w, cols, 0, slide, scratch, out)
            });
            store(out, &mut dst[..out.len()]);
            return;
        }
        let need = 2 * w + outer.len() * ow;
        if acc.len() < need {
            acc.resize(need, 0.0);
        }
        // A NaN scan pays off only when windows are tall enough to save more than it reads.
        let nan = !self.tall || may_hold_nan(src);
        let (acc, out) = acc.split_at_mut(2 * w);
        let out = &mut out[..outer.len() * ow];
        pool_rows(
            src,
            w,
            lo,
            &self.rows[outer],
            &self.cols,
            self.factor,
            self.slide,
            nan,
            acc,
            out,
        );
        store(out, &mut dst[..out.len()]);
    }
}

multiversion! {
    /// Whether `src` may hold a NaN (true also for infinities, which then take the NaN-aware
    /// path too).
    fn may_hold_nan<M: Madd>(src: &[f32]) -> bool {
        let mut acc = [0.0f32; LANES];
        let mut chunks = src.chunks_exact(LANES);
        for c in chunks.by_ref() {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a += x * 0.0;
            }
        }
        for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
            *a += x * 0.0;
        }
        // Pairwise halving: short dependency chains, and a NaN (or inf − inf) survives.
        let mut n = LANES;
        while n > 1 {
            n /= 2;
            let (lo, hi) = acc.split_at_mut(n);
            for (a, &b) in lo.iter_mut().zip(&hi[..n]) {
                *a += b;
            }
        }
        acc[0].is_nan()
    }
}

multiversion! {
    /// The maximum of `src` (not empty), NaN winning.
    fn plane_max<M: Madd>(src: &[f32]) -> f32 {
        let mut acc = [src[0]; LANES];
        let mut chunks = src.chunks_exact(LANES);
        for c in chunks.by_ref() {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a = max_nan(*a, x);
            }
        }
        for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
            *a = max_nan(*a, x);
        }
        acc.iter().fold(acc[0], |m, &x| max_nan(m, x))
    }
}

multiversion! {
    /// Output rows: for each of the row windows `rows` (input rows `lo…` in `src`), the
    /// rows reduced lane-wise into `acc`, then each of `cols`' windows of `acc` into the next
    /// row of `out` (`slide`: see [`MaxPool2dPlan`]).
    #[allow(clippy::too_many_arguments)]
    fn pool_rows<M: Madd>(
        src: &[f32],
        w: usize,
        lo: usize,
        rows: &[Range<usize>],
        cols: &[Range<usize>],
        factor: usize,
        slide: usize,
        nan: bool,
        acc: &mut [f32],
        out: &mut [f32],
    ) {
        for (r, out) in rows.iter().zip(out.chunks_exact_mut(cols.len().max(1))) {
            let src = &src[(r.start - lo) * w..(r.end - lo) * w];
            if nan {
                row_k::<true>(src, w, cols, factor, slide, acc, out);
            } else {
                row_k::<false>(src, w, cols, factor, slide, acc, out);
            }
        }
    }
}

/// One row of [`pool_rows`], with NaN handling when `N`.
#[inline(always)]
fn row_k<const N: bool>(
    src: &[f32],
    w: usize,
    cols: &[Range<usize>],
    factor: usize,
    slide: usize,
    acc: &mut [f32],
    out: &mut [f32],
) {
    let rows = src.len() / w.max(1);
    if rows == 0 {
        return;
    }
    let (acc, fixed) = acc.split_at_mut(w);
    lanes::<N>(src, w, rows, acc);
    match factor {
        1 => out.copy_from_slice(acc),
        2 => {
            for (o, p) in out.iter_mut().zip(acc.chunks_exact(2)) {
                *o = mx::<N>(p[0], p[1]);
            }
        }
        4 => {
            for (o, p) in out.iter_mut().zip(acc.chunks_exact(4)) {
                *o = mx::<N>(mx::<N>(p[0], p[1]), mx::<N>(p[2], p[3]));
            }
        }
        _ if slide > 0 => {
            let fixed = &mut fixed[..w + 1 - slide];
            lanes::<N>(acc, 1, slide, fixed);
            for (o, c) in out.iter_mut().zip(cols) {
                *o = mx::<N>(fixed[c.start], fixed[c.end - slide]);
            }
        }
        _ => {
            for (o, c) in out.iter_mut().zip(cols) {
                *o = window_max::<N>(&acc[c.clone()]);
            }
        }
    }
}

/// `dst[i] = max(src[i + r·stride] for r < count)` for every `i` of `dst` (`count ≥ 1`),
/// [`BLOCK`] lanes at a time in registers (the last block overlapping its predecessor).
#[inline(always)]
fn lanes<const N: bool>(src: &[f32], stride: usize, count: usize, dst: &mut [f32]) {
    let len = dst.len();
    if len < BLOCK {
        for (i, d) in dst.iter_mut().enumerate() {
            let mut m = src[i];
            for r in 1..count {
                m = mx::<N>(m, src[i + r * stride]);
            }
            *d = m;
        }
        return;
    }
    let mut next = 0;
    loop {
        let at = next.min(len - BLOCK);
        next += BLOCK;
        let mut m = [0.0f32; BLOCK];
        m.copy_from_slice(&src[at..at + BLOCK]);
        for r in 1..count {
            let x = &src[at + r * stride..at + r * stride + BLOCK];
            for (m, &x) in m.iter_mut().zip(x) {
                *m = mx::<N>(*m, x);
            }
        }
        dst[at..at + BLOCK].copy_from_slice(&m);
        if at == len - BLOCK {
            break;
        }
    }
}
