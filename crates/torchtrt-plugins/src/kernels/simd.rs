//! Instruction-set dispatch: kernels are written once as plain loops and compiled for the
//! baseline target plus x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512); [`multiversion!`]
//! picks the best version the CPU supports at run time.
//!
//! The level can be capped for testing with `TORCHTRT_PLUGINS_SIMD=generic|v3|v4`.

use std::sync::OnceLock;

/// An instruction-set level a kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// The crate's compile target, no extra features.
    Generic,
    /// AVX2, FMA and F16C.
    V3,
    /// AVX-512 (F, BW, VL) on top of V3.
    V4,
}

/// The level kernels run at in this process.
pub(crate) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = match std::env::var("TORCHTRT_PLUGINS_SIMD").as_deref() {
            Ok("generic") => Level::Generic,
            Ok("v3") => Level::V3,
            _ => Level::V4,
        };
        detect().min(cap)
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    let v3 = std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c");
    let v4 = v3
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl");
    if v4 {
        Level::V4
    } else if v3 {
        Level::V3
    } else {
        Level::Generic
    }
}

/// Whether kernels written with AVX-512 F and DQ intrinsics may run: the level is
/// [`Level::V4`] and the CPU has DQ too.
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512() -> bool {
    static DQ: OnceLock<bool> = OnceLock::new();
    level() == Level::V4 && *DQ.get_or_init(|| std::is_x86_feature_detected!("avx512dq"))
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Generic
}

/// Multiply-add as the level compiles it: fused (one rounding) where FMA exists, a plain
/// multiply and add otherwise (a fused `mul_add` without FMA is a slow library call).
pub(crate) trait Madd {
    /// `a * b + c`.
    fn madd(a: f32, b: f32, c: f32) -> f32;
}

/// [`Madd`] with FMA instructions.
pub(crate) struct Fused;

/// [`Madd`] without FMA.
pub(crate) struct Unfused;

impl Madd for Fused {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Madd for Unfused {
    #[inline(always)]
    fn madd(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Defines a function whose body is compiled once per [`Level`] and dispatched at run time.
/// The body's first generic parameter is a [`Madd`] (`M: Madd`) that the macro fills in; the
/// defined function has the remaining generics. Helpers the body calls must be
/// `#[inline(always)]` to be compiled for the same level.
macro_rules! multiversion {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident <$m:ident: Madd $(, $g:ident: $bound:path)* $(,)?>
        ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$attr])*
        $vis fn $name <$($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body <$m: $crate::kernels::simd::Madd $(, $g: $bound)*> ($($arg: $ty),*)
                $(-> $ret)? $body

            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
                fn v4 <$($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? {
                    body::<$crate::kernels::simd::Fused $(, $g)*>($($arg),*)
                }

                #[target_feature(enable = "avx2,fma,f16c")]
                fn v3 <$($g: $bound),*> ($($arg: $ty),*) $(-> $ret)? {
                    body::<$crate::kernels::simd::Fused $(, $g)*>($($arg),*)
                }

                match $crate::kernels::simd::level() {
                    // SAFETY: `level()` reports V4 only when the CPU has every feature `v4`
                    // is compiled for.
                    $crate::kernels::simd::Level::V4 => {
                        return unsafe { v4::<$($g),*>($($arg),*) };
                    }
                    // SAFETY: as above, for V3.
                    $crate::kernels::simd::Level::V3 => {
                        return unsafe { v3::<$($g),*>($($arg),*) };
                    }
                    $crate::kernels::simd::Level::Generic => {}
                }
            }
            body::<$crate::kernels::simd::Unfused $(, $g)*>($($arg),*)
        }
    };
}

pub(crate) use multiversion;
