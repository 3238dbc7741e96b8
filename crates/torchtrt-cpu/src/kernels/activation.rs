//! Activation functions (ONNX definitions).

use torchtrt_core::layers::{Activation, ActivationKind};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::map::{map, map_float};
use crate::dispatch::{with_float, with_int};
use crate::math::silu;
use crate::scalar::{FloatElem, Int, Real};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Activation";

struct ActivationKernel {
    kind: ActivationKind,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Activation,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let dtype = inputs[0].dtype;
    let int_ok = matches!(
        layer.kind,
        ActivationKind::Relu | ActivationKind::Clip { .. }
    );
    if !(dtype.is_float() || (int_ok && dtype.is_integer())) {
        return Err(format!("{:?} has no CPU kernel for {dtype}", layer.kind));
    }
    Ok(Box::new(ActivationKernel {
        kind: layer.kind,
        dtype,
    }))
}

impl Kernel for ActivationKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        match self.dtype {
            d if d.is_float() => with_float!(d, WHAT, T => {
                activate_float::<T>(self.kind, elems(x)?, elems_mut(out)?);
                Ok(())
            }),
            d => with_int!(d, WHAT, T => activate_int::<T>(self.kind, elems(x)?, elems_mut(out)?)),
        }
    }
}

fn activate_float<T: FloatElem>(kind: ActivationKind, x: &[T], out: &mut [T]) {
    use ActivationKind as A;
    let c = |v: f32| T::C::from_f64(f64::from(v));
    let (zero, one) = (T::C::ZERO, T::C::ONE);
    match kind {
        A::Relu => map_float(x, out, move |v| if v < zero { zero } else { v }),
        A::LeakyRelu { alpha } => {
            let alpha = c(alpha);
            map_float(x, out, move |v| if v < zero { alpha * v } else { v })
        }
        A::Sigmoid => map_float(x, out, sigmoid),
        A::Tanh => map_float(x, out, Real::tanh),
        A::Elu { alpha } => {
            let alpha = c(alpha);
            map_float(
                x,
                out,
                move |v| if v < zero { alpha * v.exp_m1() } else { v },
            )
        }
        A::Selu { alpha, gamma } => {
            let (alpha, gamma) = (c(alpha), c(gamma));
            map_float(x, out, move |v| {
                gamma * if v <= zero { alpha * v.exp_m1() } else { v }
            })
        }
        A::Celu { alpha } => {
            let alpha = c(alpha);
            map_float(x, out, move |v| {
                let neg = alpha * (v / alpha).exp_m1();
                max(zero, v) + min(zero, neg)
            })
        }
        A::Softplus => map_float(x, out, softplus),
        A::Softsign => map_float(x, out, move |v| v / (one + v.abs())),
        A::HardSigmoid { alpha, beta } => {
            let (alpha, beta) = (c(alpha), c(beta));
            map_float(x, out, move |v| max(zero, min(one, alpha * v + beta)))
        }
        A::HardSwish => {
            let (sixth, half) = (T::C::from_f64(1.0 / 6.0), c(0.5));
            map_float(x, out, move |v| v * max(zero, min(one, v * sixth + half)))
        }
        A::Clip { min: lo, max: hi } => {
            let (lo, hi) = (c(lo), c(hi));
            map_float(x, out, move |v| {
                let v = if v < lo { lo } else { v };
                if v > hi { hi } else { v }
            })
        }
        A::Gelu { tanh: false } => {
            let (half, inv_sqrt2) = (c(0.5), T::C::from_f64(std::f64::consts::FRAC_1_SQRT_2));
            map_float(x, out, move |v| half * v * (-v * inv_sqrt2).erfc())
        }
        A::Gelu { tanh: true } => {
            // 0.5·x·(1 + tanh z) as x·sigmoid(2z): no cancellation where tanh z nears −1.
            let k = T::C::from_f64(2.0 * (2.0 / std::f64::consts::PI).sqrt());
            let cubic = T::C::from_f64(0.044_715);
            map_float(x, out, move |v| v * sigmoid(k * (v + cubic * v * v * v)))
        }
        A::Mish => map_float(x, out, |v| v * softplus(v).tanh()),
        A::Silu => map_float(x, out, silu),
        A::ThresholdedRelu { alpha } => {
            let alpha = c(alpha);
            map_float(x, out, move |v| if v > alpha { v } else { zero })
        }
    }
}

fn max<C: Real>(a: C, b: C) -> C {
    if a > b { a } else { b }
}

fn min<C: Real>(a: C, b: C) -> C {
    if a < b { a } else { b }
}

/// `1 / (1 + e^-x)`, branch-free so its loop vectorises: `e^-x` saturates to ∞ for large
/// negative `x` (giving 0) and to 0 for large positive `x` (giving 1).
#[inline(always)]
fn sigmoid<C: Real>(v: C) -> C {
    C::ONE / (C::ONE + (-v).exp())
}

/// `ln(1 + e^x)` without overflow for large `x`.
fn softplus<C: Real>(v: C) -> C {
    max(v, C::ZERO) + (-v.abs()).exp().ln_1p()
}

fn activate_int<T: Int>(kind: ActivationKind, x: &[T], out: &mut [T]) -> Result<(), String> {
    match kind {
        ActivationKind::Relu => map(x, out, |v| v.max(T::ZERO)),
        ActivationKind::Clip { min, max } => {
            let lo = T::from_f64(f64::from(min).ceil());
            let hi = T::from_f64(f64::from(max).floor());
            map(x, out, move |v| v.max(lo).min(hi));
        }
        other => return Err(format!("{other:?} has no CPU kernel for {}", T::DTYPE)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The activations built on `exp`, `tanh` and `sigmoid` against f64 over a dense sweep,
    /// at the kernel tests' f32 bound (rtol 1e-5, atol 1e-7): tails included, where
    /// `1 + tanh z` would cancel.
    #[test]
    fn exponential_activations_are_f32_accurate_in_their_tails() {
        use ActivationKind as A;
        type Reference = fn(f64) -> f64;
        let cases: [(A, Reference); 4] = [
            (A::Sigmoid, |v| 1.0 / (1.0 + (-v).exp())),
            (A::Tanh, f64::tanh),
            (A::Silu, |v| v / (1.0 + (-v).exp())),
            (A::Gelu { tanh: true }, |v| {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * v * (1.0 + (k * (v + 0.044_715 * v * v * v)).tanh())
            }),
        ];
        let x: Vec<f32> = (-40_000..=40_000).map(|i| i as f32 * 2.5e-4).collect();
        for (kind, reference) in cases {
            let mut out = vec![f32::NAN; x.len()];
            activate_float::<f32>(kind, &x, &mut out);
            for (&v, &got) in x.iter().zip(&out) {
                let want = reference(f64::from(v));
                let err = (f64::from(got) - want).abs();
                assert!(
                    err <= 1e-7 + 1e-5 * want.abs(),
                    "{kind:?}({v}) = {got}, want {want}"
                );
            }
        }
    }
}
