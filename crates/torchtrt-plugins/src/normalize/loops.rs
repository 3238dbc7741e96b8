//! The vectorised inner loops of the norm kernels: reducing a contiguous run, reducing
//! across rows column by column, and scaling.

use super::reduce::{Reduce, combine64};
use crate::kernels::Float;
use crate::kernels::simd::multiversion;

/// Lanes of a contiguous-run accumulator.
const LANES: usize = 32;
/// Elements of a run folded in f32 before flushing into f64.
const FLUSH: usize = 1024;
/// Rows folded in f32 before flushing into f64.
pub(crate) const ROW_FLUSH: usize = 64;

multiversion! {
    /// Folds a contiguous run with `red` (f32 lanes, flushed into f64 every [`FLUSH`]).
    pub(crate) fn row_acc<M: Madd, T: Float, R: Reduce>(x: &[T], red: R) -> f64 {
        let mut total = 0f64;
        for block in x.chunks(FLUSH) {
            let mut lanes = [0f32; LANES];
            let (full, rest) = block.as_chunks::<LANES>();
            for c in full {
                for (a, v) in lanes.iter_mut().zip(c) {
                    *a = red.step::<M>(*a, v.to_f32());
                }
            }
            for (a, v) in lanes.iter_mut().zip(rest) {
                *a = red.step::<M>(*a, v.to_f32());
            }
            let block_acc = lanes.iter().fold(0f64, |t, &l| combine64::<R>(t, f64::from(l)));
            total = combine64::<R>(total, block_acc);
        }
        total
    }
}

multiversion! {
    /// `acc[j]` = fold over `rows` rows of `x[i * stride + j]`; rows are folded in f32 in
    /// groups of [`ROW_FLUSH`] and the groups combined in f64.
    pub(crate) fn col_acc<M: Madd, T: Float, R: Reduce>(
        x: &[T],
        stride: usize,
        rows: usize,
        red: R,
        acc: &mut [f32],
    ) {
        let w = acc.len();
        let fold_rows = |acc: &mut [f32], first: usize, last: usize| {
            acc.fill(0.0);
            for i in first..last {
                let row = &x[i * stride..i * stride + w];
                for (a, v) in acc.iter_mut().zip(row) {
                    *a = red.step::<M>(*a, v.to_f32());
                }
            }
        };
        if rows <= ROW_FLUSH {
            fold_rows(acc, 0, rows);
            return;
        }
        let mut total = vec![0f64; w];
        for first in (0..rows).step_by(ROW_FLUSH) {
            fold_rows(acc, first, (first + ROW_FLUSH).min(rows));
            for (t, &a) in total.iter_mut().zip(acc.iter()) {
                *t = combine64::<R>(*t, f64::from(a));
            }
        }
        for (a, &t) in acc.iter_mut().zip(&total) {
            *a = t as f32;
        }
    }
}

multiversion! {
    /// `y = x * s`.
    pub(crate) fn scale_run<M: Madd, T: Float>(x: &[T], y: &mut [T], s: f32) {
        for (o, &v) in y.iter_mut().zip(x) {
            *o = T::from_f32(v.to_f32() * s);
        }
    }
}

multiversion! {
    /// `y[j] = x[j] * s[j]`.
    pub(crate) fn scale_each<M: Madd, T: Float>(x: &[T], y: &mut [T], s: &[f32]) {
        for ((o, &v), &f) in y.iter_mut().zip(x).zip(s) {
            *o = T::from_f32(v.to_f32() * f);
        }
    }
}
