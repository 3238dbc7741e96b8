//! Activations fused into a producer (convolution): applied to its output tile while it is
//! still in cache, instead of in a separate pass over memory.

use torchtrt_core::layers::ActivationKind;

use crate::math::silu_with;
use crate::parallel::for_each_chunk;
use crate::scalar::{FloatElem, Real};
use crate::simd::multiversion;

/// An element-wise function applied to a kernel's output as it is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Epilogue {
    /// Nothing.
    Identity,
    /// `max(x, 0)`
    Relu,
    /// `x < 0 ? alpha·x : x`
    LeakyRelu(f64),
    /// `min(max(x, lo), hi)`
    Clip(f64, f64),
    /// `x·σ(x)`
    Silu,
}

impl Epilogue {
    /// The epilogue of a fused activation; `None` for kinds that cannot be fused.
    pub(crate) fn of(kind: Option<ActivationKind>) -> Option<Epilogue> {
        Some(match kind {
            None => Epilogue::Identity,
            Some(ActivationKind::Relu) => Epilogue::Relu,
            Some(ActivationKind::LeakyRelu { alpha }) => Epilogue::LeakyRelu(alpha.into()),
            Some(ActivationKind::Clip { min, max }) => Epilogue::Clip(min.into(), max.into()),
            Some(ActivationKind::Silu) => Epilogue::Silu,
            Some(_) => return None,
        })
    }

    /// `out = f(out + residual)` element-wise, in parallel chunks: a convolution's fused
    /// residual `Add` (and the activation after it) in one pass over the output.
    pub(crate) fn add_residual<T: FloatElem>(self, out: &mut [T], residual: &[T]) {
        let native = size_of::<T>() == size_of::<T::C>();
        for_each_chunk(out, |start, chunk| {
            let (mut rb, mut ob) = (Vec::new(), Vec::new());
            let r = T::view(&residual[start..start + chunk.len()], &mut rb);
            let old: Vec<T::C> = if native {
                Vec::new()
            } else {
                chunk.iter().map(|v| v.to_c()).collect()
            };
            T::write(chunk, &mut ob, |dst| {
                if native {
                    for (d, &v) in dst.iter_mut().zip(r) {
                        *d = *d + v;
                    }
                } else {
                    for ((d, &o), &v) in dst.iter_mut().zip(&old).zip(r) {
                        *d = o + v;
                    }
                }
                self.apply(dst);
            });
        });
    }

    /// The function on each lane of one AVX-512 vector (SiLU through
    /// [`crate::math::avx512::silu`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn vector(self, x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let zero = _mm512_setzero_ps();
        match self {
            Epilogue::Identity => x,
            Epilogue::Relu => _mm512_max_ps(zero, x),
            Epilogue::LeakyRelu(alpha) => {
                let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, zero);
                _mm512_mask_mul_ps(x, neg, x, _mm512_set1_ps(alpha as f32))
            }
            Epilogue::Clip(lo, hi) => _mm512_min_ps(
                _mm512_set1_ps(hi as f32),
                _mm512_max_ps(_mm512_set1_ps(lo as f32), x),
            ),
            Epilogue::Silu => crate::math::avx512::silu(x),
        }
    }

    /// The function on each lane of one AVX2 vector (SiLU through
    /// [`crate::math::avx2::silu`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn vector8(self, x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        let zero = _mm256_setzero_ps();
        match self {
            Epilogue::Identity => x,
            Epilogue::Relu => _mm256_max_ps(zero, x),
            Epilogue::LeakyRelu(alpha) => {
                let neg = _mm256_cmp_ps::<_CMP_LT_OQ>(x, zero);
                _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(alpha as f32)), neg)
            }
            Epilogue::Clip(lo, hi) => _mm256_min_ps(
                _mm256_set1_ps(hi as f32),
                _mm256_max_ps(_mm256_set1_ps(lo as f32), x),
            ),
            Epilogue::Silu => crate::math::avx2::silu(x),
        }
    }

    /// Applies the function to every element of `xs`. Every element is stored, computed as
    /// a select whose arms are not the loaded value itself (`v + 0` instead of `v`): LLVM
    /// turns a select that may keep the loaded value into a conditional store, which
    /// vectorises only as per-lane branches (SSE2) or masked stores (slow on AMD).
    /// Inlined, so a caller compiled for a SIMD level runs it at that level.
    #[inline(always)]
    pub(crate) fn apply<C: Real>(self, xs: &mut [C]) {
        match self {
            Epilogue::Identity => {}
            Epilogue::Relu => xs.iter_mut().for_each(|x| {
                let v = *x + C::ZERO;
                *x = if v < C::ZERO { C::ZERO } else { v };
            }),
            Epilogue::LeakyRelu(alpha) => {
                let a = C::from_f64(alpha);
                xs.iter_mut().for_each(|x| {
                    let v = *x + C::ZERO;
                    *x = if v < C::ZERO { v * a } else { v };
                });
            }
            Epilogue::Clip(lo, hi) => {
                let (lo, hi) = (C::from_f64(lo), C::from_f64(hi));
                xs.iter_mut().for_each(|x| {
                    let v = *x + C::ZERO;
                    let v = if v < lo { lo } else { v };
                    *x = if v > hi { hi } else { v };
                });
            }
            Epilogue::Silu => silu_in_place(xs),
        }
    }
}

multiversion! {
    /// `x = silu(x)` for each element, compiled for the CPU's widest vectors: its
    /// exponential is a dozen vector steps where scalar code would take a dozen per element.
    fn silu_in_place<C: Real>(xs: &mut [C]) {
        xs.iter_mut().for_each(|x| *x = silu_with::<C, M>(*x));
    }
}
