//! Instruction-set dispatch for loops written once in plain Rust: [`multiversion!`] compiles
//! a body for the baseline target, x86-64-v3 (AVX2, FMA) and AVX-512, and runs the widest
//! version the CPU supports.
//!
//! `TORCHTRT_CPU_SIMD=generic|v3|v4` (or `scalar|avx2|avx512`) caps the level (read once per
//! process), so tests can exercise every version on one machine. Every kernel that picks an
//! instruction set at run time asks [`level()`] (or [`v4`] / [`v3`]), never the CPU directly.

use std::sync::OnceLock;

use crate::scalar::Real;

/// An instruction-set level a loop is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// The crate's compile target, no extra features.
    Generic,
    /// AVX2 and FMA.
    V3,
    /// AVX-512 F on top of V3.
    V4,
}

/// The level loops run at in this process: the CPU's, capped by `TORCHTRT_CPU_SIMD`.
pub(crate) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = match std::env::var("TORCHTRT_CPU_SIMD").as_deref() {
            Ok("generic" | "scalar") => Level::Generic,
            Ok("v3" | "avx2") => Level::V3,
            _ => Level::V4,
        };
        detect().min(cap)
    })
}

/// Whether code compiled for AVX-512 F, AVX2 and FMA may run: the level is [`Level::V4`].
pub(crate) fn v4() -> bool {
    level() == Level::V4
}

/// Whether code compiled for AVX2 and FMA may run: the level is at least [`Level::V3`].
pub(crate) fn v3() -> bool {
    level() >= Level::V3
}

/// The level's name as `TORCHTRT_CPU_SIMD` spells it.
pub(crate) fn level_name() -> &'static str {
    match level() {
        Level::Generic => "generic",
        Level::V3 => "v3",
        Level::V4 => "v4",
    }
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    let v3 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    if v3 && std::is_x86_feature_detected!("avx512f") {
        Level::V4
    } else if v3 {
        Level::V3
    } else {
        Level::Generic
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Generic
}

/// The AVX-512 mask of the first `min(n, 16)` lanes of a vector of sixteen f32 (a run's
/// last, partial vector).
pub(crate) fn first_lanes(n: usize) -> u16 {
    ((1u32 << n.min(16)) - 1) as u16
}

/// Multiply-add as the level compiles it: fused (one rounding) where FMA exists, a plain
/// multiply and add otherwise (a fused `mul_add` without FMA is a slow library call).
pub(crate) trait Madd {
    /// `a · b + c`.
    fn madd<C: Real>(a: C, b: C, c: C) -> C;
}

/// [`Madd`] with FMA instructions.
pub(crate) struct Fused;

/// [`Madd`] without FMA.
pub(crate) struct Unfused;

impl Madd for Fused {
    #[inline(always)]
    fn madd<C: Real>(a: C, b: C, c: C) -> C {
        a.mul_add(b, c)
    }
}

impl Madd for Unfused {
    #[inline(always)]
    fn madd<C: Real>(a: C, b: C, c: C) -> C {
        a * b + c
    }
}

/// Defines a function whose body is compiled once per [`Level`] and dispatched on
/// [`level()`] at each call. Inside the body the type `M` is the level's [`Madd`].
/// Generic parameters take one trait bound each; helpers the body calls must be
/// `#[inline(always)]` to be compiled for the same level.
macro_rules! multiversion {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident <$($g:ident: $bound:path),* $(,)?>
        ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$attr])*
        $vis fn $name <$($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body <M: $crate::simd::Madd, $($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? $body

            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn v4 <$($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? {
                    body::<$crate::simd::Fused, $($g),*>($($arg),*)
                }

                #[target_feature(enable = "avx2,fma")]
                fn v3 <$($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? {
                    body::<$crate::simd::Fused, $($g),*>($($arg),*)
                }

                match $crate::simd::level() {
                    // SAFETY: `level()` reports V4 only when the CPU has AVX-512 F, AVX2
                    // and FMA.
                    $crate::simd::Level::V4 => return unsafe { v4::<$($g),*>($($arg),*) },
                    // SAFETY: `level()` reports V3 only when the CPU has AVX2 and FMA.
                    $crate::simd::Level::V3 => return unsafe { v3::<$($g),*>($($arg),*) },
                    $crate::simd::Level::Generic => {}
                }
            }
            body::<$crate::simd::Unfused, $($g),*>($($arg),*)
        }
    };
}

pub(crate) use multiversion;
