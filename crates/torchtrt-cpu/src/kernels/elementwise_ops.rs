//! The binary operations themselves, per element family, applied to one run of elements.

use torchtrt_core::layers::ElementwiseOp;

use crate::scalar::{Int, Real};

/// One side of a run: consecutive elements, or one element repeated (broadcast).
#[derive(Clone, Copy)]
pub(super) enum Operand<'a, T> {
    /// Elements read in order.
    Slice(&'a [T]),
    /// One element for the whole run.
    Scalar(T),
}

/// Writes `f(a_i, b_i)` into each element of `out`, with a loop per operand form so each
/// vectorises.
#[inline(always)]
pub(super) fn zip<A: Copy, O: Copy>(
    a: Operand<'_, A>,
    b: Operand<'_, A>,
    out: &mut [O],
    f: impl Fn(A, A) -> O,
) {
    match (a, b) {
        (Operand::Slice(a), Operand::Slice(b)) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        (Operand::Slice(a), Operand::Scalar(y)) => {
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        (Operand::Scalar(x), Operand::Slice(b)) => {
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        (Operand::Scalar(x), Operand::Scalar(y)) => out.fill(f(x, y)),
    }
}

/// Arithmetic: same dtype in and out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    /// Remainder; `fmod`: sign of the dividend (C), else of the divisor (Python).
    Mod {
        fmod: bool,
    },
    /// `a < 0 ? b · a : a`
    PRelu,
}

/// Comparisons: bool out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Compare {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

/// Logical operations on bools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Logic {
    And,
    Or,
    Xor,
}

/// Bit shifts of integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shift {
    Left,
    Right,
}

/// An element-wise operation, by the element family it works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BinOp {
    Arith(Arith),
    Compare(Compare),
    Logic(Logic),
    Shift(Shift),
}

impl BinOp {
    /// Classifies a layer's operation.
    pub(super) fn new(op: ElementwiseOp, fmod: bool) -> BinOp {
        use ElementwiseOp as E;
        match op {
            E::Add => BinOp::Arith(Arith::Add),
            E::Sub => BinOp::Arith(Arith::Sub),
            E::Mul => BinOp::Arith(Arith::Mul),
            E::Div => BinOp::Arith(Arith::Div),
            E::Pow => BinOp::Arith(Arith::Pow),
            E::Max => BinOp::Arith(Arith::Max),
            E::Min => BinOp::Arith(Arith::Min),
            E::Mod => BinOp::Arith(Arith::Mod { fmod }),
            E::PRelu => BinOp::Arith(Arith::PRelu),
            E::And => BinOp::Logic(Logic::And),
            E::Or => BinOp::Logic(Logic::Or),
            E::Xor => BinOp::Logic(Logic::Xor),
            E::Equal => BinOp::Compare(Compare::Equal),
            E::Less => BinOp::Compare(Compare::Less),
            E::LessOrEqual => BinOp::Compare(Compare::LessOrEqual),
            E::Greater => BinOp::Compare(Compare::Greater),
            E::GreaterOrEqual => BinOp::Compare(Compare::GreaterOrEqual),
            E::ShiftLeft => BinOp::Shift(Shift::Left),
            E::ShiftRight => BinOp::Shift(Shift::Right),
        }
    }
}

/// Arithmetic on a float compute type; `Max`/`Min` propagate NaN.
pub(super) fn arith_real<C: Real>(op: Arith, a: Operand<'_, C>, b: Operand<'_, C>, out: &mut [C]) {
    if op == Arith::Pow {
        return pow(a, b, out);
    }
    arith_apply(op, Zip { a, b, out });
}

/// Runs `op`'s element function over `target`, chosen once for all its elements.
pub(super) fn arith_apply<C: Real>(op: Arith, target: impl Apply<C>) {
    match op {
        Arith::Add => target.apply(|x, y| x + y),
        Arith::Sub => target.apply(|x, y| x - y),
        Arith::Mul => target.apply(|x, y| x * y),
        Arith::Div => target.apply(|x, y| x / y),
        Arith::Pow => target.apply(|x, y| x.powf(y)),
        Arith::Max => target.apply(|x, y| if x > y || x.is_nan() { x } else { y }),
        Arith::Min => target.apply(|x, y| if x < y || x.is_nan() { x } else { y }),
        Arith::PRelu => target.apply(|x, y| if x < C::ZERO { y * x } else { x }),
        Arith::Mod { fmod: true } => target.apply(|x, y| x % y),
        Arith::Mod { fmod: false } => target.apply(|x, y| {
            let r = x % y;
            if r != C::ZERO && ((r < C::ZERO) != (y < C::ZERO)) {
                r + y
            } else {
                r
            }
        }),
    }
}

/// Elements an element function `f(a, b)` is applied to, writing an output.
pub(super) trait Apply<C> {
    /// Writes `f(a, b)` for each element.
    fn apply(self, f: impl Fn(C, C) -> C);
}

/// Two operands of the output's length (or broadcast scalars): [`zip`].
pub(super) struct Zip<'a, 'o, C> {
    pub(super) a: Operand<'a, C>,
    pub(super) b: Operand<'a, C>,
    pub(super) out: &'o mut [C],
}

impl<C: Copy> Apply<C> for Zip<'_, '_, C> {
    #[inline(always)]
    fn apply(self, f: impl Fn(C, C) -> C) {
        zip(self.a, self.b, self.out, f)
    }
}

/// Consecutive rows of one operand, each paired with the same row of the other: the
/// output's rows are `f(rows[i], row)`, or `f(row, rows[i])` when `row_first`.
pub(super) struct RowsWithRow<'a, 'o, C> {
    pub(super) rows: &'a [C],
    pub(super) row: &'a [C],
    pub(super) row_first: bool,
    pub(super) out: &'o mut [C],
}

impl<C: Copy> Apply<C> for RowsWithRow<'_, '_, C> {
    #[inline(always)]
    fn apply(self, f: impl Fn(C, C) -> C) {
        let len = self.row.len();
        let rows = self
            .out
            .chunks_exact_mut(len)
            .zip(self.rows.chunks_exact(len));
        for (out, x) in rows {
            let pairs = out.iter_mut().zip(x).zip(self.row);
            if self.row_first {
                pairs.for_each(|((o, &x), &r)| *o = f(r, x));
            } else {
                pairs.for_each(|((o, &x), &r)| *o = f(x, r));
            }
        }
    }
}

/// `a^b`; a constant exponent of 2, 1/2 or 3/4 (LRN's default β) takes products and square
/// roots instead of the general `powf`, compiled for the widest vector instructions the CPU
/// has.
fn pow<C: Real>(a: Operand<'_, C>, b: Operand<'_, C>, out: &mut [C]) {
    let (Operand::Slice(x), Operand::Scalar(y)) = (a, b) else {
        return zip(a, b, out, |x, y| x.powf(y));
    };
    let exponent = [0.5, 0.75, 2.0]
        .into_iter()
        .position(|e| C::from_f64(e) == y);
    match exponent {
        Some(0) => widest_map(x, out, |x| {
            let r = x.sqrt() + C::ZERO;
            if x == C::NEG_INFINITY { C::INFINITY } else { r }
        }),
        Some(1) => widest_map(x, out, |x| {
            let r = x.sqrt();
            let r = r * r.sqrt();
            if x == C::NEG_INFINITY { C::INFINITY } else { r }
        }),
        Some(_) => widest_map(x, out, |x| x * x),
        None => zip(a, b, out, |x, y| x.powf(y)),
    }
}

/// Writes `f(x_i)` into each element of `out`, with the loop compiled for the widest vector
/// instructions the CPU has (AVX-512, AVX2 + FMA, or the baseline).
#[inline(always)]
fn widest_map<C: Copy>(x: &[C], out: &mut [C], f: impl Fn(C) -> C) {
    #[inline(always)]
    fn body<C: Copy>(x: &[C], out: &mut [C], f: &impl Fn(C) -> C) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = f(v);
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn v4<C: Copy>(x: &[C], out: &mut [C], f: &impl Fn(C) -> C) {
            body(x, out, f);
        }
        #[target_feature(enable = "avx2,fma")]
        fn v3<C: Copy>(x: &[C], out: &mut [C], f: &impl Fn(C) -> C) {
            body(x, out, f);
        }
        if crate::simd::v4() {
            // SAFETY: `v4()` holds only when the CPU has AVX-512 F, AVX2 and FMA.
            return unsafe { v4(x, out, &f) };
        }
        if crate::simd::v3() {
            // SAFETY: `v3()` holds only when the CPU has AVX2 and FMA.
            return unsafe { v3(x, out, &f) };
        }
    }
    body(x, out, &f);
}

/// Arithmetic on integers: wrapping, division truncating toward zero. Divisors must have
/// been checked for zeros.
pub(super) fn arith_int<T: Int>(op: Arith, a: Operand<'_, T>, b: Operand<'_, T>, out: &mut [T]) {
    match op {
        Arith::Add => zip(a, b, out, T::wadd),
        Arith::Sub => zip(a, b, out, T::wsub),
        Arith::Mul => zip(a, b, out, T::wmul),
        Arith::Div => zip(a, b, out, T::wdiv),
        Arith::Pow => zip(a, b, out, |x, y| {
            T::from_i64(int_pow(x.to_i64(), y.to_i64()))
        }),
        Arith::Max => zip(a, b, out, Ord::max),
        Arith::Min => zip(a, b, out, Ord::min),
        Arith::PRelu => zip(a, b, out, |x, y| if x < T::ZERO { y.wmul(x) } else { x }),
        Arith::Mod { fmod: true } => zip(a, b, out, T::wrem),
        Arith::Mod { fmod: false } => zip(a, b, out, |x, y| {
            let r = x.wrem(y);
            if r != T::ZERO && ((r < T::ZERO) != (y < T::ZERO)) {
                r.wadd(y)
            } else {
                r
            }
        }),
    }
}

/// `base^exp`, wrapping; a negative exponent gives the truncated reciprocal power.
fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 if exp % 2 == 0 => 1,
            -1 => -1,
            _ => 0,
        };
    }
    let (mut acc, mut b, mut e) = (1i64, base, exp as u64);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    acc
}

/// Bit shifts: bits past the width are dropped; a shift by a negative count or at least
/// the width gives 0, or −1 for a right shift of a negative value.
pub(super) fn shift<T: Int>(op: Shift, a: Operand<'_, T>, b: Operand<'_, T>, out: &mut [T]) {
    let bits = 8 * std::mem::size_of::<T>() as u32;
    let count = |y: T| u32::try_from(y.to_i64()).ok().filter(|&n| n < bits);
    match op {
        Shift::Left => zip(a, b, out, |x, y| count(y).map_or(T::ZERO, |n| x.shl(n))),
        Shift::Right => zip(a, b, out, |x, y| {
            count(y).map_or_else(|| x.shr(bits - 1).shr(1), |n| x.shr(n))
        }),
    }
}

/// Comparisons, writing 0 or 1.
pub(super) fn compare<T: Copy + PartialOrd>(
    op: Compare,
    a: Operand<'_, T>,
    b: Operand<'_, T>,
    out: &mut [u8],
) {
    match op {
        Compare::Equal => zip(a, b, out, |x, y| u8::from(x == y)),
        Compare::Less => zip(a, b, out, |x, y| u8::from(x < y)),
        Compare::LessOrEqual => zip(a, b, out, |x, y| u8::from(x <= y)),
        Compare::Greater => zip(a, b, out, |x, y| u8::from(x > y)),
        Compare::GreaterOrEqual => zip(a, b, out, |x, y| u8::from(x >= y)),
    }
}

/// Logical operations on bools (any non-zero byte is true), writing 0 or 1.
pub(super) fn logic(op: Logic, a: Operand<'_, u8>, b: Operand<'_, u8>, out: &mut [u8]) {
    match op {
        Logic::And => zip(a, b, out, |x, y| u8::from(x != 0 && y != 0)),
        Logic::Or => zip(a, b, out, |x, y| u8::from(x != 0 || y != 0)),
        Logic::Xor => zip(a, b, out, |x, y| u8::from((x != 0) != (y != 0))),
    }
}
