//! The passes of the separable engine, on `f32` rows: along the innermost axis a gather
//! per contiguous row ([`rows_pass`]), along an outer axis weighted sums (or maxima) of
//! whole blocks of rows ([`blocks`]). Both are compiled per instruction-set level.

use std::ops::Range;

use super::poly;
use super::taps::AxisTaps;
use crate::kernels::simd::{Madd, multiversion};

/// How the taps of an output combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The weighted sum.
    Sum,
    /// The maximum, ignoring weights; NaN wins, as in PyTorch's max pooling.
    Max,
}

/// `max(a, b)` where a NaN in either operand wins.
#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    if b > a || b.is_nan() { b } else { a }
}

multiversion! {
    /// Resamples rows of `in_len` inputs (input index `lo` first) along the innermost axis,
    /// writing outputs `outputs` of each row. A periodic interior goes through the
    /// vectorised kernels of [`poly`], the rest element by element.
    pub fn rows_pass<M: Madd>(
        reduce: Reduce,
        axis: &AxisTaps,
        src: &[f32],
        in_len: usize,
        lo: usize,
        outputs: Range<usize>,
        dst: &mut [f32],
    ) {
        let (in_len, width) = (in_len.max(1), outputs.len().max(1));
        if axis.identity {
            for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
                d.copy_from_slice(&s[outputs.start - lo..outputs.end - lo]);
            }
            return;
        }
        let at = |r: &Range<usize>| r.start - outputs.start..r.end - outputs.start;
        #[cfg(target_arch = "x86_64")]
        if let (Reduce::Sum, Some(t)) = (reduce, &axis.two_tap) {
            let whole = t.whole_blocks(&outputs);
            let (head, tail) = (outputs.start..whole.start, whole.end..outputs.end);
            let rows = (src.len() / in_len).min(dst.len() / width);
            let (src, dst) = (&src[..rows * in_len], &mut dst[..rows * width]);
            t.rows(src, in_len, lo, whole.clone(), &mut dst[at(&whole).start..], width);
            for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
                gather::<M>(reduce, axis, s, lo, head.clone(), &mut d[at(&head)]);
                gather::<M>(reduce, axis, s, lo, tail.clone(), &mut d[at(&tail)]);
            }
            return;
        }
        if let Some(p) = &axis.periodic {
            let (head, mid, _) = p.split(outputs.clone());
            let done = match reduce {
                _ if mid.is_empty() => 0,
                Reduce::Sum => {
                    poly::sum_rows::<M>(p, src, in_len, lo, outputs.clone(), mid.clone(), dst)
                }
                Reduce::Max => poly::max_rows(p, src, in_len, lo, outputs.clone(), mid.clone(), dst),
            };
            if done > 0 {
                let tail = mid.start + done..outputs.end;
                for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
                    gather::<M>(reduce, axis, s, lo, head.clone(), &mut d[at(&head)]);
                    gather::<M>(reduce, axis, s, lo, tail.clone(), &mut d[at(&tail)]);
                }
                return;
            }
        }
        for (s, d) in src.chunks_exact(in_len).zip(dst.chunks_exact_mut(width)) {
            gather::<M>(reduce, axis, s, lo, outputs.clone(), d);
        }
    }
}

/// The element-by-element row kernel. Sums run tap by tap in order, as the periodic
/// kernels do, so both give identical results on finite data; weight-0 taps are skipped
/// (an infinite input under a window's padding tap stays out of an average).
#[inline(always)]
fn gather<M: Madd>(
    reduce: Reduce,
    axis: &AxisTaps,
    src: &[f32],
    lo: usize,
    outputs: Range<usize>,
    dst: &mut [f32],
) {
    let n = axis.n;
    let idx = &axis.index[outputs.start * n..outputs.end * n];
    let w = &axis.weight[outputs.start * n..outputs.end * n];
    match (reduce, n) {
        (Reduce::Sum, 2) => {
            for ((d, i), wk) in dst
                .iter_mut()
                .zip(idx.chunks_exact(2))
                .zip(w.chunks_exact(2))
            {
                *d = M::madd(wk[1], src[i[1] - lo], wk[0] * src[i[0] - lo]);
            }
        }
        (Reduce::Sum, _) => {
            for ((d, i), wk) in dst
                .iter_mut()
                .zip(idx.chunks_exact(n))
                .zip(w.chunks_exact(n))
            {
                let mut acc = 0.0;
                for (&ik, &wk) in i.iter().zip(wk) {
                    if wk != 0.0 {
                        acc = M::madd(wk, src[ik - lo], acc);
                    }
                }
                *d = acc;
            }
        }
        (Reduce::Max, _) => {
            for (d, i) in dst.iter_mut().zip(idx.chunks_exact(n)) {
                *d = i
                    .iter()
                    .fold(src[i[0] - lo], |m, &ik| max_nan(m, src[ik - lo]));
            }
        }
    }
}

multiversion! {
    /// Combines whole blocks of `len` values along an outer axis: `src` holds the blocks of
    /// input indices `lo…`; writes the blocks of outputs `outputs` into `dst`.
    pub fn blocks<M: Madd>(
        reduce: Reduce,
        axis: &AxisTaps,
        src: &[f32],
        lo: usize,
        len: usize,
        outputs: Range<usize>,
        dst: &mut [f32],
    ) {
        for (o, d) in outputs.zip(dst.chunks_exact_mut(len.max(1))) {
            block::<M>(reduce, axis, src, lo, len, o, d);
        }
    }
}

#[inline(always)]
fn block<M: Madd>(
    reduce: Reduce,
    axis: &AxisTaps,
    src: &[f32],
    lo: usize,
    len: usize,
    o: usize,
    dst: &mut [f32],
) {
    let n = axis.n;
    let idx = &axis.index[o * n..(o + 1) * n];
    let w = &axis.weight[o * n..(o + 1) * n];
    let block = |i: usize| &src[(i - lo) * len..(i - lo + 1) * len];
    match reduce {
        Reduce::Sum if n == 2 && w[0] != 0.0 && w[1] != 0.0 => {
            fused2::<M>(dst, true, block(idx[0]), w[0], block(idx[1]), w[1]);
        }
        Reduce::Sum => {
            let mut taps = idx.iter().zip(w).filter(|t| *t.1 != 0.0);
            let mut init = true;
            loop {
                let mut group = [(&[][..], 0.0f32); 4];
                let mut g = 0;
                for (&i, &wk) in taps.by_ref().take(4) {
                    group[g] = (block(i), wk);
                    g += 1;
                }
                let [(a, wa), (b, wb), (c, wc), (d, wd)] = group;
                match g {
                    0 if init => dst.fill(0.0),
                    1 => fused1::<M>(dst, init, a, wa),
                    2 => fused2::<M>(dst, init, a, wa, b, wb),
                    3 => fused3::<M>(dst, init, a, wa, b, wb, c, wc),
                    4 => fused4::<M>(dst, init, a, wa, b, wb, c, wc, d, wd),
                    _ => {}
                }
                if g < 4 {
                    break;
                }
                init = false;
            }
        }
        Reduce::Max => {
            dst.copy_from_slice(block(idx[0]));
            for &i in &idx[1..] {
                for (d, &x) in dst.iter_mut().zip(block(i)) {
                    *d = max_nan(*d, x);
                }
            }
        }
    }
}

/// Defines `dst = Σ w·b` (added to `dst` unless `init`) over a fixed number of blocks, tap
/// by tap in order; each block is its own local slice of `dst`'s length, so the loop has no
/// bounds checks and vectorises.
macro_rules! fused {
    ($name:ident: $b0:ident $w0:ident $(, $b:ident $w:ident)*) => {
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        fn $name<M: Madd>(
            dst: &mut [f32],
            init: bool,
            $b0: &[f32],
            $w0: f32,
            $($b: &[f32], $w: f32),*
        ) {
            let n = dst.len();
            let $b0 = &$b0[..n];
            $(let $b = &$b[..n];)*
            if init {
                for j in 0..n {
                    let acc = $w0 * $b0[j];
                    $(let acc = M::madd($w, $b[j], acc);)*
                    dst[j] = acc;
                }
            } else {
                for j in 0..n {
                    let acc = M::madd($w0, $b0[j], dst[j]);
                    $(let acc = M::madd($w, $b[j], acc);)*
                    dst[j] = acc;
                }
            }
        }
    };
}
fused!(fused1: a wa);
fused!(fused2: a wa, b wb);
fused!(fused3: a wa, b wb, c wc);
fused!(fused4: a wa, b wb, c wc, d wd);
