//! The p-norm accumulations: how one element contributes, how partial results combine, and
//! how the accumulated value becomes the norm.

use crate::kernels::simd::Madd;

/// The `order` of a norm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Order {
    /// Sum of absolute values.
    One,
    /// Euclidean norm.
    Two,
    /// Largest absolute value.
    Inf,
    /// `(Σ|x|^p)^(1/p)` for any other positive `p`.
    P(f32),
}

impl Order {
    /// The order for a validated `p` (positive or `+inf`).
    pub(crate) fn new(p: f32) -> Order {
        if p == 1.0 {
            Order::One
        } else if p == 2.0 {
            Order::Two
        } else if p == f32::INFINITY {
            Order::Inf
        } else {
            Order::P(p)
        }
    }
}

/// One way of folding elements into an accumulator.
pub(crate) trait Reduce: Copy + Send + Sync {
    /// Partial results combine by `max` (else by `+`).
    const MAX: bool;

    /// Folds element `v` into `acc`.
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32;

    /// The norm of an accumulated value.
    fn finish(self, acc: f32) -> f32;
}

/// Combines two partial accumulations held in f64.
#[inline(always)]
pub(crate) fn combine64<R: Reduce>(a: f64, b: f64) -> f64 {
    if R::MAX {
        if b > a || b.is_nan() { b } else { a }
    } else {
        a + b
    }
}

/// `max(a, b)` that keeps a NaN from either side.
#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    if b > a || b.is_nan() { b } else { a }
}

/// `Σ|x|`.
#[derive(Clone, Copy)]
pub(crate) struct L1;
/// `√Σx²`.
#[derive(Clone, Copy)]
pub(crate) struct L2;
/// `max|x|`.
#[derive(Clone, Copy)]
pub(crate) struct LInf;
/// `(Σ|x|^p)^(1/p)`.
#[derive(Clone, Copy)]
pub(crate) struct Lp(pub(crate) f32);
/// Plain sum of already-mapped partials (later stages of a multi-axis reduction).
#[derive(Clone, Copy)]
pub(crate) struct Sum;
/// Plain max of already-mapped partials.
#[derive(Clone, Copy)]
pub(crate) struct Max;

impl Reduce for L1 {
    const MAX: bool = false;
    #[inline(always)]
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32 {
        acc + v.abs()
    }
    #[inline(always)]
    fn finish(self, acc: f32) -> f32 {
        acc
    }
}

impl Reduce for L2 {
    const MAX: bool = false;
    #[inline(always)]
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32 {
        M::madd(v, v, acc)
    }
    #[inline(always)]
    fn finish(self, acc: f32) -> f32 {
        acc.sqrt()
    }
}

impl Reduce for LInf {
    const MAX: bool = true;
    #[inline(always)]
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32 {
        max_nan(acc, v.abs())
    }
    #[inline(always)]
    fn finish(self, acc: f32) -> f32 {
        acc
    }
}

impl Reduce for Lp {
    const MAX: bool = false;
    #[inline(always)]
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32 {
        acc + v.abs().powf(self.0)
    }
    #[inline(always)]
    fn finish(self, acc: f32) -> f32 {
        acc.powf(1.0 / self.0)
    }
}

impl Reduce for Sum {
    const MAX: bool = false;
    #[inline(always)]
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32 {
        acc + v
    }
    #[inline(always)]
    fn finish(self, acc: f32) -> f32 {
        acc
    }
}

impl Reduce for Max {
    const MAX: bool = true;
    #[inline(always)]
    fn step<M: Madd>(self, acc: f32, v: f32) -> f32 {
        max_nan(acc, v)
    }
    #[inline(always)]
    fn finish(self, acc: f32) -> f32 {
        acc
    }
}
