//! The GELU CPU kernel: one vectorised pass, bias folded in, parallel over chunks.

use rayon::prelude::*;

use crate::kernels::math;
use crate::kernels::simd::{Madd, multiversion};
use crate::kernels::{Float, par};

/// Elements processed together, so several independent vectors are in flight.
const BLOCK: usize = 64;

/// Which GELU formula a layer computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// `x · Φ(x)`, Φ through erf (`approximate = "none"`).
    Erf,
    /// The tanh approximation (`approximate = "tanh"`).
    Tanh,
}

impl Form {
    /// Parses the `approximate` field.
    pub(crate) fn parse(name: &str) -> Option<Form> {
        match name {
            "none" => Some(Form::Erf),
            "tanh" => Some(Form::Tanh),
            _ => None,
        }
    }

    /// The `approximate` field value of this form.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Form::Erf => "none",
            Form::Tanh => "tanh",
        }
    }
}

/// A GELU formula as a type, so each kernel is compiled for one.
trait Activation {
    fn apply<M: Madd>(v: f32) -> f32;
}

struct ErfGelu;
struct TanhGelu;

impl Activation for ErfGelu {
    #[inline(always)]
    fn apply<M: Madd>(v: f32) -> f32 {
        math::gelu_erf::<M>(v)
    }
}

impl Activation for TanhGelu {
    #[inline(always)]
    fn apply<M: Madd>(v: f32) -> f32 {
        math::gelu_tanh::<M>(v)
    }
}

/// `y = gelu(x + bias)`, with `bias` (when given) repeating along the last dimension.
/// `x` and `y` have the same length, a multiple of the bias length.
pub(crate) fn gelu<T: Float>(x: &[T], y: &mut [T], bias: Option<&[f32]>, form: Form) {
    let bias = bias.unwrap_or(&[]);
    let chunk = par::chunk_len(x.len(), std::mem::size_of::<T>());
    y.par_chunks_mut(chunk)
        .zip(x.par_chunks(chunk))
        .enumerate()
        .for_each(|(i, (y, x))| match form {
            Form::Erf => gelu_chunk::<T, ErfGelu>(x, y, bias, i * chunk),
            Form::Tanh => gelu_chunk::<T, TanhGelu>(x, y, bias, i * chunk),
        });
}

multiversion! {
    /// GELU of one chunk starting at flat element `start` (which places the bias).
    fn gelu_chunk<M: Madd, T: Float, A: Activation>(x: &[T], y: &mut [T], bias: &[f32], start: usize) {
        if bias.is_empty() {
            let mut ys = y.chunks_exact_mut(BLOCK);
            let mut xs = x.chunks_exact(BLOCK);
            for (yb, xb) in (&mut ys).zip(&mut xs) {
                let mut v = [0f32; BLOCK];
                for (o, &xi) in v.iter_mut().zip(xb) {
                    *o = A::apply::<M>(xi.to_f32());
                }
                for (o, &vi) in yb.iter_mut().zip(&v) {
                    *o = T::from_f32(vi);
                }
            }
            for (o, &v) in ys.into_remainder().iter_mut().zip(xs.remainder()) {
                *o = T::from_f32(A::apply::<M>(v.to_f32()));
            }
            return;
        }
        let mut j = start % bias.len();
        let mut pos = 0;
        while pos < x.len() {
            let len = (bias.len() - j).min(x.len() - pos);
            let xs = &x[pos..pos + len];
            let ys = &mut y[pos..pos + len];
            for ((o, &v), &b) in ys.iter_mut().zip(xs).zip(&bias[j..j + len]) {
                *o = T::from_f32(A::apply::<M>(v.to_f32() + b));
            }
            pos += len;
            j = 0;
        }
    }
}
