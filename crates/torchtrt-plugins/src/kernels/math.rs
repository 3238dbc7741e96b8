//! Branch-free, vectorisable approximations of `2^x`, the normal tail and the GELU forms, accurate to
//! a few f32 ulps. Every function is `#[inline(always)]` and generic over [`Madd`] so that
//! it is compiled into the loops of [`multiversion!`](super::simd::multiversion) kernels.

use super::simd::Madd;

/// `log2(e)`.
const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `1.5 * 2^23`: adding it rounds an f32 of magnitude below `2^22` to an integer.
const ROUND_MAGIC: f32 = 12_582_912.0;
/// `-√(2/π) · 2 · log2(e)`: the tanh GELU's `-2u` in base 2 is `x · (C1 + C2 x²)`.
const TANH_C1: f32 = -2.302_208_2;
/// `TANH_C1 · 0.044715`.
const TANH_C2: f32 = -0.102_943_24;
/// Largest `|x|` the normal tail is computed for; beyond, `Φ(-|x|)` is below the smallest
/// normal f32 and is taken as 0.
const TAIL_MAX: f32 = 13.0;

/// Horner evaluation of `c[0] + c[1] x + …` (coefficients lowest first).
#[inline(always)]
fn poly<M: Madd, const N: usize>(x: f32, c: [f32; N]) -> f32 {
    let mut acc = c[N - 1];
    for &ci in c[..N - 1].iter().rev() {
        acc = M::madd(acc, x, ci);
    }
    acc
}

/// `2^w` for `w` in `[-126, 127]` (unchecked), relative error below 2e-7: `2^n · 2^f` with
/// `n = round(w)` and a degree-5 minimax polynomial for `2^f`, `|f| <= 1/2`.
#[inline(always)]
fn exp2_in_range<M: Madd>(w: f32) -> f32 {
    let shifted = w + ROUND_MAGIC;
    let f = w - (shifted - ROUND_MAGIC);
    let s = poly::<M, 5>(
        f,
        [
            std::f32::consts::LN_2,
            0.240_222_42,
            0.055_507_34,
            0.009_671_511,
            0.001_326_466_8,
        ],
    );
    let p = M::madd(f, s, 1.0);
    let n = (shifted.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    p * f32::from_bits((n.wrapping_add(127) << 23) as u32)
}

/// `Φ(-|x|) = erfc(|x|/√2) / 2`, the standard normal tail, as `e^(-x²/2) · P(|x|)/Q(|x|)`
/// with a (3, 4) rational minimax fit; 0 beyond `|x| = 13`. Relative error below 1e-6 for
/// `|x| <= 4`, growing to 1e-5 at `|x| = 13` as the rounding of `x²` is amplified.
#[inline(always)]
pub(crate) fn normal_tail<M: Madd>(x: f32) -> f32 {
    let a = x.abs();
    let inside = a <= TAIL_MAX;
    let a = if inside { a } else { TAIL_MAX };
    let gauss = exp2_in_range::<M>((a * a) * (-0.5 * LOG2_E));
    let p = poly::<M, 4>(a, [0.499_999_82, 0.359_998_46, 0.118_401_57, 0.016_780_557]);
    let q = poly::<M, 5>(
        a,
        [1.0, 1.517_864_5, 0.948_020_1, 0.296_568_13, 0.042_068_273],
    );
    if inside { gauss * p / q } else { 0.0 }
}

/// Exact GELU, `x · Φ(x)`, relative error below 1e-5 for every `x` (1e-6 for `|x| <= 4`):
/// Φ comes from the normal tail on both sides, so there is no cancellation for negative
/// `x`.
#[inline(always)]
pub(crate) fn gelu_erf<M: Madd>(x: f32) -> f32 {
    let tail = normal_tail::<M>(x);
    let phi = if x < 0.0 { tail } else { 1.0 - tail };
    x * phi
}

/// Tanh GELU, `x · (1 + tanh(√(2/π)(x + 0.044715 x³))) / 2`, computed as
/// `x / (1 + e^(-2u))`; relative error below 1e-6.
#[inline(always)]
pub(crate) fn gelu_tanh<M: Madd>(x: f32) -> f32 {
    let w = x * M::madd(x * x, TANH_C2, TANH_C1);
    let w = if w < -125.5 { -125.5 } else { w };
    let w = if w > 126.9 { 126.9 } else { w };
    x / (1.0 + exp2_in_range::<M>(w))
}
