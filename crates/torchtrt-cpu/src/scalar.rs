//! Element traits the kernels are written against: [`Real`] (the f32/f64 compute types),
//! [`FloatElem`] (storage types and their compute type) and [`Int`] (integer storage).

use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use torchtrt_core::plugin_api::Element;

use crate::math;
use crate::simd::Madd;

/// `x` seen as f32 values when `C` is f32 (for kernels with an f32-only fast path).
pub(crate) fn as_f32<C: 'static>(x: &[C]) -> Option<&[f32]> {
    (std::any::TypeId::of::<C>() == std::any::TypeId::of::<f32>())
        // SAFETY: `C` is `f32`, so the slice's type is unchanged.
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) })
}

/// [`as_f32`] for a mutable slice.
pub(crate) fn as_f32_mut<C: 'static>(x: &mut [C]) -> Option<&mut [f32]> {
    (std::any::TypeId::of::<C>() == std::any::TypeId::of::<f32>())
        // SAFETY: as `as_f32`.
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len()) })
}

/// A floating-point compute type (f32 or f64).
pub(crate) trait Real:
    Copy
    + Send
    + Sync
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
    + 'static
{
    /// 0
    const ZERO: Self;
    /// 1
    const ONE: Self;
    /// +∞
    const INFINITY: Self;
    /// −∞
    const NEG_INFINITY: Self;

    /// Rounds an f64 to this type.
    fn from_f64(v: f64) -> Self;
    /// Error function.
    fn erf(self) -> Self;
    /// Complementary error function.
    fn erfc(self) -> Self;
    /// True for NaN.
    fn is_nan(self) -> bool;
    /// NaN when `nan` holds, else `self`, with no branch (bit operations): the last merges
    /// of a max or min over random data would otherwise mispredict half the time.
    fn nan_if(self, nan: bool) -> Self;
    /// Round half to even.
    fn round_even(self) -> Self;

    /// `|x|`
    fn abs(self) -> Self;
    /// `eˣ`
    fn exp(self) -> Self;
    /// `eˣ` with the multiply-adds `M` compiles (vectorises for f32).
    fn exp_with<M: Madd>(self) -> Self;
    /// SiLU, `x·σ(x)` ([`math::silu`]), with the multiply-adds `M` compiles.
    fn silu_with<M: Madd>(self) -> Self;
    /// `self · a + b` with one rounding (a library call without FMA instructions).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `eˣ − 1`
    fn exp_m1(self) -> Self;
    /// `ln x`
    fn ln(self) -> Self;
    /// `ln(1 + x)`
    fn ln_1p(self) -> Self;
    /// `√x`
    fn sqrt(self) -> Self;
    /// `xʸ`
    fn powf(self, y: Self) -> Self;
    /// Round down.
    fn floor(self) -> Self;
    /// Round up.
    fn ceil(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Tangent.
    fn tan(self) -> Self;
    /// Arc sine.
    fn asin(self) -> Self;
    /// Arc cosine.
    fn acos(self) -> Self;
    /// Arc tangent.
    fn atan(self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Inverse hyperbolic sine.
    fn asinh(self) -> Self;
    /// Inverse hyperbolic cosine.
    fn acosh(self) -> Self;
    /// Inverse hyperbolic tangent.
    fn atanh(self) -> Self;
}

macro_rules! real {
    ($t:ident, $bits:ident, $exp:path, $exp_with:expr, $silu_with:expr, $tanh:path) => {
        impl Real for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const INFINITY: $t = $t::INFINITY;
            const NEG_INFINITY: $t = $t::NEG_INFINITY;

            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn erf(self) -> $t {
                math::erf(self)
            }
            #[inline(always)]
            fn erfc(self) -> $t {
                math::erfc(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
            #[inline(always)]
            fn nan_if(self, nan: bool) -> $t {
                let mask = $t::NAN.to_bits() & (nan as $bits).wrapping_neg();
                $t::from_bits(self.to_bits() | mask)
            }
            #[inline(always)]
            fn round_even(self) -> $t {
                $t::round_ties_even(self)
            }
            #[inline(always)]
            fn exp(self) -> $t {
                $exp(self)
            }
            #[inline(always)]
            fn exp_with<M: Madd>(self) -> $t {
                $exp_with(self)
            }
            #[inline(always)]
            fn silu_with<M: Madd>(self) -> $t {
                $silu_with(self)
            }
            #[inline(always)]
            fn tanh(self) -> $t {
                $tanh(self)
            }
            #[inline(always)]
            fn mul_add(self, a: $t, b: $t) -> $t {
                $t::mul_add(self, a, b)
            }
            real!(@forward $t: abs exp_m1 ln ln_1p sqrt floor ceil sin cos tan asin acos
                atan sinh cosh asinh acosh atanh);
            #[inline(always)]
            fn powf(self, y: $t) -> $t {
                $t::powf(self, y)
            }
        }
    };
    (@forward $t:ident: $($f:ident)*) => {
        $(
            #[inline(always)]
            fn $f(self) -> $t {
                $t::$f(self)
            }
        )*
    };
}
real!(
    f32,
    u32,
    math::exp_f32,
    math::exp_f32_with::<M>,
    math::silu_f32_with::<M>,
    math::tanh_f32
);
real!(f64, u64, f64::exp, f64::exp, silu_f64::<M>, f64::tanh);

/// SiLU in f64: `x / (1 + e^{−x})` with the library's `exp` (no multiply-adds to choose).
#[inline(always)]
fn silu_f64<M: Madd>(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// `Σ x` with eight independent partial sums, so the loop vectorises.
pub(crate) fn lane_sum<C: Real>(x: &[C]) -> C {
    let mut lanes = [C::ZERO; 8];
    let chunks = x.chunks_exact(8);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l = *l + v;
        }
    }
    let head = lanes.iter().fold(C::ZERO, |a, &l| a + l);
    tail.iter().fold(head, |a, &v| a + v)
}

/// A floating-point storage type and the [`Real`] type it is computed in.
pub(crate) trait FloatElem: Element {
    /// The compute type: f64 for f64, f32 for the rest.
    type C: Real;

    /// `src` in the compute type: borrowed when it already is, else converted into `buf`.
    fn view<'a>(src: &'a [Self], buf: &'a mut Vec<Self::C>) -> &'a [Self::C];

    /// Lets `f` write `dst` in the compute type: directly when it already is, else through
    /// `buf`, converted afterwards.
    fn write(dst: &mut [Self], buf: &mut Vec<Self::C>, f: impl FnOnce(&mut [Self::C]));

    /// One element in the compute type.
    fn to_c(self) -> Self::C;
}

macro_rules! float_native {
    ($t:ident) => {
        impl FloatElem for $t {
            type C = $t;
            #[inline(always)]
            fn view<'a>(src: &'a [$t], _: &'a mut Vec<$t>) -> &'a [$t] {
                src
            }
            #[inline(always)]
            fn write(dst: &mut [$t], _: &mut Vec<$t>, f: impl FnOnce(&mut [$t])) {
                f(dst)
            }
            #[inline(always)]
            fn to_c(self) -> $t {
                self
            }
        }
    };
}
float_native!(f32);
float_native!(f64);

macro_rules! float_half {
    ($t:ident) => {
        impl FloatElem for $t {
            type C = f32;
            fn view<'a>(src: &'a [$t], buf: &'a mut Vec<f32>) -> &'a [f32] {
                buf.clear();
                buf.resize(src.len(), 0.0);
                src.convert_to_f32_slice(buf);
                buf
            }
            fn write(dst: &mut [$t], buf: &mut Vec<f32>, f: impl FnOnce(&mut [f32])) {
                buf.clear();
                buf.resize(dst.len(), 0.0);
                f(buf);
                dst.convert_from_f32_slice(buf);
            }
            #[inline(always)]
            fn to_c(self) -> f32 {
                self.to_f32()
            }
        }
    };
}
float_half!(f16);
float_half!(bf16);

/// An integer storage type. Arithmetic wraps, as in ONNX runtimes.
pub(crate) trait Int: Element + Ord {
    /// 0
    const ZERO: Self;

    /// Widens (sign- or zero-extending).
    fn to_i64(self) -> i64;
    /// Narrows, wrapping.
    fn from_i64(v: i64) -> Self;
    /// Converts from f64: truncates toward zero and saturates; NaN is 0.
    fn from_f64(v: f64) -> Self;
    /// `a + b`, wrapping.
    fn wadd(self, b: Self) -> Self;
    /// `a − b`, wrapping.
    fn wsub(self, b: Self) -> Self;
    /// `a · b`, wrapping.
    fn wmul(self, b: Self) -> Self;
    /// `a / b` truncated toward zero, wrapping; `b` must not be zero.
    fn wdiv(self, b: Self) -> Self;
    /// Remainder of the truncated division (sign of `a`); `b` must not be zero.
    fn wrem(self, b: Self) -> Self;
    /// `−a`, wrapping.
    fn wneg(self) -> Self;
    /// `|a|`, wrapping.
    fn wabs(self) -> Self;
    /// `a << n` for `n` below the width.
    fn shl(self, n: u32) -> Self;
    /// `a >> n` for `n` below the width: arithmetic for signed types, logical for unsigned.
    fn shr(self, n: u32) -> Self;
}

macro_rules! int {
    ($($t:ident: $signed:tt),*) => {$(
        impl Int for $t {
            const ZERO: $t = 0;
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn from_f64(v: f64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn wadd(self, b: $t) -> $t {
                self.wrapping_add(b)
            }
            #[inline(always)]
            fn wsub(self, b: $t) -> $t {
                self.wrapping_sub(b)
            }
            #[inline(always)]
            fn wmul(self, b: $t) -> $t {
                self.wrapping_mul(b)
            }
            #[inline(always)]
            fn wdiv(self, b: $t) -> $t {
                self.checked_div(b).unwrap_or_else(|| self.wrapping_neg())
            }
            #[inline(always)]
            fn wrem(self, b: $t) -> $t {
                self.checked_rem(b).unwrap_or(0)
            }
            #[inline(always)]
            fn wneg(self) -> $t {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn shl(self, n: u32) -> $t {
                self.wrapping_shl(n)
            }
            #[inline(always)]
            fn shr(self, n: u32) -> $t {
                self.wrapping_shr(n)
            }
            int!(@abs $signed, $t);
        }
    )*};
    (@abs true, $t:ident) => {
        #[inline(always)]
        fn wabs(self) -> $t {
            self.wrapping_abs()
        }
    };
    (@abs false, $t:ident) => {
        #[inline(always)]
        fn wabs(self) -> $t {
            self
        }
    };
}
int!(i64: true, i32: true, i16: true, i8: true, u8: false, u16: false, u32: false, u64: false);
