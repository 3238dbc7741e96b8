//! Linear quantization to 8-bit integers (ONNX `QuantizeLinear`) and the per-axis scale
//! lookup it shares with dequantization.

use std::borrow::Cow;

use torchtrt_core::layers::{Quantize, normalize_axis, quantized_range};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::parallel::for_each_chunk;
use crate::simd::multiversion;
use crate::tensor_access::{check_arity, check_output, words_mut};

const WHAT: &str = "Quantize";

struct QuantizeKernel {
    axis: i64,
    to: DType,
}

pub(super) fn prepare(
    layer: &Quantize,
    _inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(QuantizeKernel {
        axis: layer.axis,
        to: layer.to,
    }))
}

/// The values of a float tensor as f32 (borrowed when they are f32).
pub(crate) fn f32_values(t: &Tensor) -> Result<Cow<'_, [f32]>, String> {
    match t.dtype() {
        DType::F32 => t
            .as_slice::<f32>()
            .map(Cow::Borrowed)
            .map_err(|e| e.to_string()),
        d if d.is_float() => Ok(Cow::Owned(
            t.to_f64_vec().iter().map(|&v| v as f32).collect(),
        )),
        d => Err(format!("expected a float tensor, got {d}")),
    }
}

/// How the scale and zero point of a (de)quantize layer apply to `x`: one pair for every
/// element, or one per index of `axis`.
pub(crate) struct Scales {
    scale: Vec<f32>,
    zero_point: Vec<i32>,
    /// Elements per step of the axis (1 for a scalar scale, which then covers everything).
    inner: usize,
}

impl Scales {
    /// The scales of `inputs` (`x`, `scale`, optional `zero_point`) along `axis`.
    pub(crate) fn new(what: &str, axis: i64, inputs: &[&Tensor]) -> Result<Scales, String> {
        let (x, scale) = (inputs[0], inputs[1]);
        let values = f32_values(scale).map_err(|e| format!("{what} scale: {e}"))?;
        let zero_point: Vec<i32> = match inputs.get(2) {
            Some(zp) => zp
                .to_i64_vec()
                .ok_or_else(|| format!("{what}: zero point {zp} is not integer"))?
                .into_iter()
                .map(|v| v as i32)
                .collect(),
            None => vec![0; values.len()],
        };
        if zero_point.len() != values.len() {
            return Err(format!(
                "{what}: {} zero points for {} scales",
                zero_point.len(),
                values.len()
            ));
        }
        let inner = match values.len() {
            1 => x.numel().max(1),
            n => {
                let a = normalize_axis(axis, x.rank())?;
                if x.shape()[a] != n {
                    return Err(format!("{what}: {n} scales for axis {a} of {x}"));
                }
                x.shape()[a + 1..].iter().product()
            }
        };
        Ok(Scales {
            scale: values.into_owned(),
            zero_point,
            inner,
        })
    }

    /// The scale and zero point of element `i`.
    fn at(&self, i: usize) -> (f32, i32) {
        let k = (i / self.inner.max(1)) % self.scale.len();
        (self.scale[k], self.zero_point[k])
    }

    /// Calls `f(offset, len, scale, zero_point)` for each run of elements of
    /// `start..start + len` that share one scale (`offset` counts from `start`).
    pub(crate) fn runs(&self, start: usize, len: usize, mut f: impl FnMut(usize, usize, f32, i32)) {
        let inner = self.inner.max(1);
        let (mut i, end) = (start, start + len);
        while i < end {
            let stop = ((i / inner + 1) * inner).min(end);
            let (s, z) = self.at(i);
            f(i - start, stop - i, s, z);
            i = stop;
        }
    }
}

impl Kernel for QuantizeKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=3, 1)?;
        let x = inputs[0];
        let scales = Scales::new(WHAT, self.axis, inputs)?;
        let values = f32_values(x).map_err(|e| format!("{WHAT} x: {e}"))?;
        let range = quantized_range(self.to).ok_or(WHAT)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.to, x.shape())?;
        let values = values.as_ref();
        match self.to.size() {
            1 => fill(words_mut::<u8>(out)?, values, &scales, range),
            _ => fill(words_mut::<u16>(out)?, values, &scales, range),
        }
        Ok(())
    }
}

/// An integer of a quantized type's width, written from its value.
pub(super) trait Word: Copy + Send {
    fn of(v: i32) -> Self;
}

impl Word for u8 {
    #[inline(always)]
    fn of(v: i32) -> u8 {
        v as u8
    }
}

impl Word for u16 {
    #[inline(always)]
    fn of(v: i32) -> u16 {
        v as u16
    }
}

/// `out[i] = quantize(values[i])`, in parallel chunks of runs sharing a scale.
fn fill<W: Word>(out: &mut [W], values: &[f32], scales: &Scales, range: (i32, i32)) {
    for_each_chunk(out, |start, chunk| {
        scales.runs(start, chunk.len(), |at, len, s, zp| {
            let src = &values[start + at..start + at + len];
            quantize_run(src, &mut chunk[at..at + len], s, zp, range);
        });
    });
}

multiversion! {
    /// [`quantize_into`] as its own call.
    fn quantize_run<W: Word>(src: &[f32], dst: &mut [W], scale: f32, zp: i32, range: (i32, i32)) {
        quantize_into(src, dst, scale, zp, range);
    }
}

/// [`torchtrt_core::layers::quantize_value`] over a run of one scale, in a form that
/// vectorizes: the rounding, the zero point and the clamp in f32 (exact for the integers
/// that do not saturate). Inlined into its callers, so it takes their SIMD level.
#[inline(always)]
pub(super) fn quantize_into<W: Word>(
    src: &[f32],
    dst: &mut [W],
    scale: f32,
    zp: i32,
    range: (i32, i32),
) {
    let (zp, lo, hi) = (zp as f32, range.0 as f32, range.1 as f32);
    for (o, &v) in dst.iter_mut().zip(src) {
        let r = (v / scale).round_ties_even();
        let q = if r.is_nan() { zp } else { r + zp };
        let q = if q < lo {
            lo
        } else if q > hi {
            hi
        } else {
            q
        };
        // SAFETY: `q` is finite and within `range` (NaN became the zero point, the clamp
        // bounds the rest), so the conversion is exact.
        *o = W::of(unsafe { q.to_int_unchecked::<i32>() });
    }
}
