//! Special functions the standard library lacks — `erf`, `erfc` and SiLU, in the compute
//! type — and an f32 `exp` and `tanh` without a libm call, so loops around them vectorise
//! (with AVX-512 and AVX2 forms of `exp` and SiLU for kernels written in intrinsics).
//!
//! `erfc` uses a Chebyshev-fitted form with a relative error below 1.2·10⁻⁷ for every
//! argument; `erf` uses its Maclaurin series near zero (where `1 − erfc` would cancel) and
//! `1 − erfc` elsewhere, so both stay within about 1.2·10⁻⁷ relative: f32 precision, and
//! the same accuracy for f64.

use crate::scalar::Real;
use crate::simd::{Madd, Unfused};

/// `eˣ` in f32 by range reduction and a degree-7 polynomial: within 2 ulp for normal
/// results, 0 where the result would be below the smallest normal f32, ∞ above
/// ln(f32::MAX), NaN for NaN. Branch-free.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    exp_f32_with::<Unfused>(x)
}

/// The constants of [`exp_f32_with`]: `x = n·ln 2 + r` with `ln 2` split in two for an
/// exact product, `n` rounded by adding [`ROUND`] (1.5·2²³), `eʳ` by its Taylor polynomial
/// (highest power first), the argument clamped to `[LOWEST, HIGHEST]`. The AVX-512 softmax
/// takes the same steps on vectors.
pub(crate) mod exp_f32_steps {
    /// High part of ln 2 (exact in a product with `n`).
    pub(crate) const LN2_HI: f32 = 0.693_145_75;
    /// ln 2 − [`LN2_HI`].
    pub(crate) const LN2_LO: f32 = 1.428_606_8e-6;
    /// Added and subtracted to round to an integer.
    pub(crate) const ROUND: f32 = 12_582_912.0;
    /// Below this `eˣ` is 0 (the smallest normal result's logarithm).
    pub(crate) const LOWEST: f32 = -87.336_55;
    /// The argument's upper clamp (the result overflows to ∞ past it).
    pub(crate) const HIGHEST: f32 = 88.75;
    /// `1/7!, 1/6!, …, 1/2, 1, 1`: the polynomial's coefficients, highest power first.
    pub(crate) const TAYLOR: [f32; 8] = [
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ];
}

/// [`exp_f32`] with the multiply-adds `M` compiles (fused where the caller has FMA).
#[inline(always)]
pub(crate) fn exp_f32_with<M: Madd>(x: f32) -> f32 {
    use exp_f32_steps::*;
    let xc = x.clamp(LOWEST, HIGHEST);
    let shifted = M::madd(xc, std::f32::consts::LOG2_E, ROUND);
    let n = shifted - ROUND;
    let r = M::madd(-n, LN2_LO, M::madd(-n, LN2_HI, xc));
    let mut p = TAYLOR[0];
    for &c in &TAYLOR[1..] {
        p = M::madd(p, r, c);
    }
    let ni = (shifted.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let top = if ni > 127 { 2.0 } else { 1.0 };
    let y = p * f32::from_bits((ni.min(127).wrapping_add(127) as u32) << 23) * top;
    if x < LOWEST { 0.0 } else { y }
}

/// `tanh x` in f32 without a libm call, branch-free: below |x| = 0.55 its odd Taylor
/// polynomial (to x¹⁵, within 5·10⁻⁸ relative there), above `(1 − e) / (1 + e)` with
/// `e = e^{−2|x|}` ≤ 1/3, which does not cancel; ±1 for large |x|, NaN for NaN.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    const TAYLOR: [f32; 8] = [
        -929_569.0 / 638_512_875.0,
        21_844.0 / 6_081_075.0,
        -1_382.0 / 155_925.0,
        62.0 / 2_835.0,
        -17.0 / 315.0,
        2.0 / 15.0,
        -1.0 / 3.0,
        1.0,
    ];
    let a = x.abs();
    let e = exp_f32(-2.0 * a);
    let large = ((1.0 - e) / (1.0 + e)).copysign(x);
    let x2 = x * x;
    let small = x * TAYLOR[1..].iter().fold(TAYLOR[0], |p, &c| p * x2 + c);
    if a < 0.55 { small } else { large }
}

/// Coefficients of `erf(x) / x` as a polynomial in `x²`:
/// `2/√π · (−1)ⁿ / (n! (2n + 1))`.
const SERIES: [f64; 12] = series();

const fn series() -> [f64; 12] {
    let mut c = [0.0; 12];
    let mut factorial = 1.0;
    let mut n = 0;
    while n < 12 {
        if n > 0 {
            factorial *= n as f64;
        }
        let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
        c[n] = sign * std::f64::consts::FRAC_2_SQRT_PI / (factorial * (2 * n + 1) as f64);
        n += 1;
    }
    c
}

/// Coefficients of the exponent's polynomial in `t = 1 / (1 + z/2)`, lowest first.
const ERFC_POLY: [f64; 10] = [
    -1.265_512_23,
    1.000_023_68,
    0.374_091_96,
    0.096_784_18,
    -0.186_288_06,
    0.278_868_07,
    -1.135_203_98,
    1.488_515_87,
    -0.822_152_23,
    0.170_872_77,
];

/// `erfc(z)` for `z ≥ 0`: `t · exp(−z² + P(t))`.
#[inline(always)]
fn erfc_pos<C: Real>(z: C) -> C {
    let t = C::ONE / (C::ONE + C::from_f64(0.5) * z);
    let poly = ERFC_POLY
        .iter()
        .rev()
        .fold(C::ZERO, |acc, &c| acc * t + C::from_f64(c));
    t * (poly - z * z).exp()
}

/// SiLU, `x·σ(x) = x / (1 + e^{−x})`, branch-free: in f32 by [`silu_f32_with`], in f64
/// with the library's `exp` (which saturates to ∞ below −709, giving −0).
#[inline(always)]
pub(crate) fn silu<C: Real>(x: C) -> C {
    x.silu_with::<Unfused>()
}

/// [`silu`] with the multiply-adds `M` compiles (fused in code compiled for FMA).
#[inline(always)]
pub(crate) fn silu_with<C: Real, M: Madd>(x: C) -> C {
    x.silu_with::<M>()
}

/// The constants of [`silu_f32_with`]: `x / (1 + e^{−x})` with the argument of the
/// exponential clamped to `[LOWEST, HIGHEST]`, `e^{−x} = 2ⁿ·eʳ` reduced as
/// [`exp_f32_steps`] does, and `eʳ` by a polynomial of degree 6 fitted to its relative
/// error on `|r| ≤ ln 2 / 2` (below 2·10⁻⁹ there). The polynomial is evaluated at
/// `s = −r`, which the reduction gives without negating `x`.
pub(crate) mod silu_f32_steps {
    /// Below this `e^{−x}` could overflow, and SiLU is 0 (its magnitude is below 10⁻³⁶).
    pub(crate) const LOWEST: f32 = -88.0;
    /// Above this `1 + e^{−x}` rounds to 1 (SiLU is `x`) and `2ⁿ` stays a normal number.
    pub(crate) const HIGHEST: f32 = 86.0;
    /// The polynomial's coefficients in `s`, highest power first (those of `eʳ` with the
    /// signs of odd powers flipped).
    pub(crate) const POLY: [f32; 7] = [
        0.001_384_365,
        -0.008_374_155,
        0.041_668,
        -0.166_664_32,
        0.499_999_94,
        -1.0,
        1.0,
    ];
}

/// SiLU of an f32 in a dozen multiply-adds and one division, within 2.5 ulp of the exact
/// result for results above 10⁻³⁶ in magnitude, 0 below [`silu_f32_steps::LOWEST`] (and
/// for −∞); NaN stays NaN. The vector forms in [`avx512`] and [`avx2`] take the same steps
/// and give the same bits.
#[inline(always)]
pub(crate) fn silu_f32_with<M: Madd>(x: f32) -> f32 {
    use exp_f32_steps::{LN2_HI, LN2_LO, ROUND};
    use silu_f32_steps::*;
    let xc = x.clamp(LOWEST, HIGHEST);
    let shifted = M::madd(-xc, std::f32::consts::LOG2_E, ROUND);
    let n = shifted - ROUND;
    let s = M::madd(n, LN2_LO, M::madd(n, LN2_HI, xc));
    let mut p = POLY[0];
    for &c in &POLY[1..] {
        p = M::madd(p, s, c);
    }
    let ni = (shifted.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let e = p * f32::from_bits((ni.wrapping_add(127) as u32) << 23);
    if x < LOWEST { 0.0 } else { x / (1.0 + e) }
}

/// The AVX-512 forms of [`exp_f32`] and [`silu`], sixteen lanes at a time.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use std::arch::x86_64::*;

    /// `eˣ` lane by lane, the steps of [`crate::math::exp_f32_with`] with fused multiply-adds
    /// (bit for bit the same results): NaN stays NaN, below the smallest normal result 0.
    #[target_feature(enable = "avx512f")]
    pub(crate) fn exp(x: __m512) -> __m512 {
        use crate::math::exp_f32_steps::*;
        let splat = _mm512_set1_ps;
        // max/min return their second operand when either is NaN: NaN passes through.
        let xc = _mm512_min_ps(splat(HIGHEST), _mm512_max_ps(splat(LOWEST), x));
        let n = _mm512_sub_ps(
            _mm512_fmadd_ps(xc, splat(std::f32::consts::LOG2_E), splat(ROUND)),
            splat(ROUND),
        );
        let r = _mm512_fnmadd_ps(n, splat(LN2_LO), _mm512_fnmadd_ps(n, splat(LN2_HI), xc));
        let mut p = splat(TAYLOR[0]);
        for &c in &TAYLOR[1..] {
            p = _mm512_fmadd_ps(p, r, splat(c));
        }
        // p·2ⁿ rounded once, as the scalar p·2^min(n, 127)·(1 or 2) is: both products are exact
        // but where the result is subnormal or overflows.
        let y = _mm512_scalef_ps(p, n);
        let under = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, splat(LOWEST));
        _mm512_mask_blend_ps(under, y, _mm512_setzero_ps())
    }

    /// [`super::silu_f32_with`] lane by lane (bit for bit the same results).
    #[target_feature(enable = "avx512f")]
    pub(crate) fn silu(x: __m512) -> __m512 {
        use crate::math::exp_f32_steps::{LN2_HI, LN2_LO, ROUND};
        use crate::math::silu_f32_steps::*;
        let splat = _mm512_set1_ps;
        // max/min return their second operand when either is NaN: NaN passes through.
        let xc = _mm512_min_ps(splat(HIGHEST), _mm512_max_ps(splat(LOWEST), x));
        let n = _mm512_sub_ps(
            _mm512_fnmadd_ps(xc, splat(std::f32::consts::LOG2_E), splat(ROUND)),
            splat(ROUND),
        );
        let s = _mm512_fmadd_ps(n, splat(LN2_LO), _mm512_fmadd_ps(n, splat(LN2_HI), xc));
        let mut p = splat(POLY[0]);
        for &c in &POLY[1..] {
            p = _mm512_fmadd_ps(p, s, splat(c));
        }
        let e = _mm512_scalef_ps(p, n);
        let inside = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(x, splat(LOWEST));
        _mm512_maskz_div_ps(inside, x, _mm512_add_ps(splat(1.0), e))
    }
}

/// The AVX2 forms of [`exp_f32`] (for arguments `≤ 0`) and [`silu`], eight lanes at a time.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    /// `eˣ` lane by lane for arguments `≤ 0` (or NaN), as a softmax takes them after
    /// subtracting the maximum and SiLU as `e^{−|x|}`: the steps of
    /// [`crate::math::exp_f32_with`] with fused multiply-adds (bit for bit the same results)
    /// without those for results near overflow. Exact up to 88 (`2ⁿ ≤ 2¹²⁷`); wrong above.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn exp_nonpositive(x: __m256) -> __m256 {
        use crate::math::exp_f32_steps::*;
        let splat = _mm256_set1_ps;
        // max returns its second operand when either is NaN: NaN passes through.
        let xc = _mm256_max_ps(splat(LOWEST), x);
        let shifted = _mm256_fmadd_ps(xc, splat(std::f32::consts::LOG2_E), splat(ROUND));
        let n = _mm256_sub_ps(shifted, splat(ROUND));
        let r = _mm256_fnmadd_ps(n, splat(LN2_LO), _mm256_fnmadd_ps(n, splat(LN2_HI), xc));
        let mut p = splat(TAYLOR[0]);
        for &c in &TAYLOR[1..] {
            p = _mm256_fmadd_ps(p, r, splat(c));
        }
        // The bits of `shifted` are ROUND's plus n: 2ⁿ's exponent field is them plus 127.
        let bias = _mm256_set1_epi32(127 - ROUND.to_bits() as i32);
        let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_castps_si256(shifted), bias));
        let y = _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
        _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x, splat(LOWEST)), y)
    }

    /// [`super::silu_f32_with`] lane by lane (bit for bit the same results).
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn silu(x: __m256) -> __m256 {
        use crate::math::exp_f32_steps::{LN2_HI, LN2_LO, ROUND};
        use crate::math::silu_f32_steps::*;
        let splat = _mm256_set1_ps;
        // max/min return their second operand when either is NaN: NaN passes through.
        let xc = _mm256_min_ps(splat(HIGHEST), _mm256_max_ps(splat(LOWEST), x));
        let shifted = _mm256_fnmadd_ps(xc, splat(std::f32::consts::LOG2_E), splat(ROUND));
        let n = _mm256_sub_ps(shifted, splat(ROUND));
        let s = _mm256_fmadd_ps(n, splat(LN2_LO), _mm256_fmadd_ps(n, splat(LN2_HI), xc));
        let mut p = splat(POLY[0]);
        for &c in &POLY[1..] {
            p = _mm256_fmadd_ps(p, s, splat(c));
        }
        // The bits of `shifted` are ROUND's plus n: 2ⁿ's exponent field is them plus 127.
        let bias = _mm256_set1_epi32(127 - ROUND.to_bits() as i32);
        let scale = _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_castps_si256(shifted), bias));
        let e = _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
        let y = _mm256_div_ps(x, _mm256_add_ps(splat(1.0), e));
        _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x, splat(LOWEST)), y)
    }
}

/// The error function. Both forms are evaluated and one selected, without branches, so
/// loops around it vectorise.
#[inline(always)]
pub(crate) fn erf<C: Real>(x: C) -> C {
    let x2 = x * x;
    let series = x * SERIES
        .iter()
        .rev()
        .fold(C::ZERO, |acc, &c| acc * x2 + C::from_f64(c));
    let tail = C::ONE - erfc_pos(x.abs());
    let tail = if x < C::ZERO { -tail } else { tail };
    if x.abs() < C::from_f64(0.5) {
        series
    } else {
        tail
    }
}

/// The complementary error function, `1 − erf(x)`, without cancellation for large `x`;
/// branch-free like [`erf`].
#[inline(always)]
pub(crate) fn erfc<C: Real>(x: C) -> C {
    let e = erfc_pos(x.abs());
    if x < C::ZERO { C::from_f64(2.0) - e } else { e }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_f32_is_within_two_ulp() {
        check_exp(exp_f32);
        check_exp(exp_f32_with::<crate::simd::Fused>);
    }

    fn check_exp(exp: fn(f32) -> f32) {
        let mut x = -110.0f32;
        while x < 90.0 {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            if want > f32::MIN_POSITIVE as f64 && want < f32::MAX as f64 {
                assert!(
                    (got - want).abs() <= 2.5e-7 * want,
                    "exp({x}) = {got}, want {want}"
                );
            } else if want >= f32::MAX as f64 {
                assert_eq!(got, f64::INFINITY, "exp({x})");
            } else {
                assert!(got <= 2.0 * f32::MIN_POSITIVE as f64, "exp({x}) = {got}");
            }
            x += 0.0137;
        }
        for x in [88.0f32, 88.5, 88.72, -87.3, -87.336, -87.34] {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            if want > f32::MIN_POSITIVE as f64 {
                assert!(
                    (got - want).abs() <= 2.5e-7 * want,
                    "exp({x}) = {got}, want {want}"
                );
            }
        }
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(0.0), 1.0);
    }

    /// Arguments across the whole range of `exp`, its clamps, zeros and NaN.
    fn vector_arguments() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..40_000).map(|i| -110.0 + i as f32 * 0.005).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            88.72,
            -87.34,
        ]);
        xs.resize(xs.len().next_multiple_of(16), 1.0);
        xs
    }

    /// `got` (the results of a vector form of `scalar` over `xs`) bit for bit `scalar`'s,
    /// where `x` is in `domain`.
    fn check_bits(
        name: &str,
        xs: &[f32],
        got: &[f32],
        scalar: fn(f32) -> f32,
        domain: fn(f32) -> bool,
    ) {
        for (&x, &g) in xs.iter().zip(got) {
            let want = scalar(x);
            assert!(
                !domain(x) || g.to_bits() == want.to_bits() || want.is_nan() && g.is_nan(),
                "{name}({x}): {g} against {want}"
            );
        }
    }

    fn fused_exp(x: f32) -> f32 {
        exp_f32_with::<crate::simd::Fused>(x)
    }

    fn fused_silu(x: f32) -> f32 {
        silu_with::<f32, crate::simd::Fused>(x)
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_forms_match_the_scalar_ones_bit_for_bit() {
        use std::arch::x86_64::*;
        if !crate::simd::v3() {
            return;
        }
        let xs = vector_arguments();
        let mut got = vec![vec![0f32; xs.len()]; 2];
        for (k, lanes) in xs.chunks_exact(8).enumerate() {
            // SAFETY: `v3()` holds only when the CPU has AVX2 and FMA; the stores write 8 lanes.
            unsafe {
                let x = _mm256_loadu_ps(lanes.as_ptr());
                _mm256_storeu_ps(got[0][k * 8..].as_mut_ptr(), avx2::exp_nonpositive(x));
                _mm256_storeu_ps(got[1][k * 8..].as_mut_ptr(), avx2::silu(x));
            }
        }
        check_bits("exp_nonpositive", &xs, &got[0], fused_exp, |x| {
            x.is_nan() || x <= 88.0
        });
        check_bits("silu", &xs, &got[1], fused_silu, |_| true);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx512_forms_match_the_scalar_ones_bit_for_bit() {
        use std::arch::x86_64::*;
        if !crate::simd::v4() {
            return;
        }
        let xs = vector_arguments();
        let mut got = vec![vec![0f32; xs.len()]; 2];
        for (k, lanes) in xs.chunks_exact(16).enumerate() {
            // SAFETY: `v4()` holds only when the CPU has AVX-512 F; the stores write 16 lanes.
            unsafe {
                let x = _mm512_loadu_ps(lanes.as_ptr());
                _mm512_storeu_ps(got[0][k * 16..].as_mut_ptr(), avx512::exp(x));
                _mm512_storeu_ps(got[1][k * 16..].as_mut_ptr(), avx512::silu(x));
            }
        }
        check_bits("exp", &xs, &got[0], fused_exp, |_| true);
        check_bits("silu", &xs, &got[1], fused_silu, |_| true);
    }

    #[test]
    fn silu_f32_is_within_three_ulp() {
        for silu in [silu::<f32>, fused_silu] {
            let mut x = -95.0f32;
            while x < 95.0 {
                for v in [x, x * 1e-3, x * 1e-6] {
                    let want = v as f64 / (1.0 + (-(v as f64)).exp());
                    let got = silu(v) as f64;
                    let ulp = f64::from((want.abs() as f32).next_up() - want.abs() as f32);
                    if want.abs() > 1e-36 {
                        assert!(
                            (got - want).abs() <= 2.5 * ulp,
                            "silu({v}) = {got}, want {want}"
                        );
                    } else {
                        assert!(got.abs() <= 1e-36, "silu({v}) = {got}");
                    }
                }
                x += 0.00731;
            }
            assert!(silu(f32::NAN).is_nan());
            assert_eq!(silu(f32::INFINITY), f32::INFINITY);
            assert_eq!(silu(0.0), 0.0);
            assert_eq!(silu(1e30), 1e30);
            assert_eq!(silu(-1e30), 0.0);
            assert_eq!(silu(f32::NEG_INFINITY), 0.0);
        }
        assert_eq!(silu(-800.0f64), -0.0);
    }

    #[test]
    fn tanh_f32_is_within_three_ulp() {
        let mut x = -12.0f32;
        while x < 12.0 {
            for v in [x, x * 1e-3, x * 1e-6] {
                let want = (v as f64).tanh();
                let got = tanh_f32(v) as f64;
                assert!(
                    (got - want).abs() <= 3.6e-7 * want.abs().max(f32::MIN_POSITIVE as f64),
                    "tanh({v}) = {got}, want {want}"
                );
            }
            x += 0.00731;
        }
        for v in [0.549_999_9f32, 0.55, 0.550_000_1, 20.0, 50.0, 1e30] {
            let want = (v as f64).tanh();
            assert!(
                (tanh_f32(v) as f64 - want).abs() <= 3.6e-7 * want,
                "tanh({v})"
            );
            assert_eq!(tanh_f32(-v), -tanh_f32(v), "tanh(-{v})");
        }
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn matches_known_values() {
        let known = [
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (-1.5, -0.966_105_146_475_310_7),
        ];
        for (x, want) in known {
            assert!((erf(x) - want).abs() <= 2e-7 * want.abs(), "erf({x})");
            assert!(
                (erf(x as f32) as f64 - want).abs() <= 3e-7 * want.abs(),
                "erf({x}f32)"
            );
        }
        let tail = erfc(4.0);
        assert!((tail - 1.541_725_790_028_002e-8).abs() <= 2e-7 * tail);
        let tail = erfc(4.0f32) as f64;
        assert!((tail - 1.541_725_790_028_002e-8).abs() <= 2e-6 * tail);
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(f64::INFINITY), 1.0);
    }
}
