//! Mean/variance normalization over axes with an optional broadcast scale and bias: the
//! statistics per group first (two passes over each group), then one broadcast pass
//! `(x − mean) · inv_std · scale + bias`.

use torchtrt_core::layers::Normalization;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::reduce::ReducePlan;
use crate::dispatch::with_float;
use crate::parallel::{for_each_chunk, for_each_row};
use crate::scalar::{FloatElem, Real, lane_sum};
use crate::strided::{Strided, broadcast_strides};
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, elems, elems_mut,
};

const WHAT: &str = "Normalization";

struct NormKernel {
    layer: Normalization,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Normalization,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(NormKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for NormKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=3, 1)?;
        for t in inputs {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let x = inputs[0];
        let axes = self
            .layer
            .resolved_axes(x.rank())
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, x.shape())?;
        let stats_shape: Vec<usize> = x
            .shape()
            .iter()
            .enumerate()
            .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
            .collect();
        let stat = broadcast_strides(&stats_shape, x.shape())?;
        let mut strides: Vec<[isize; 4]> = stat.iter().map(|&s| [0, s, 0, 0]).collect();
        let contiguous = signed_strides(x.shape());
        for (d, s) in strides.iter_mut().enumerate() {
            s[0] = contiguous[d];
        }
        for (k, t) in inputs[1..].iter().enumerate() {
            let bs = broadcast_strides(t.shape(), x.shape())
                .map_err(|e| format!("{WHAT}: {} {e}", ["scale", "bias"][k]))?;
            for (s, b) in strides.iter_mut().zip(bs) {
                s[2 + k] = b;
            }
        }
        let walk = Strided::new(x.shape(), &strides, [0; 4]);
        let plan = ReducePlan::new(x.shape(), &axes);
        let eps = f64::from(self.layer.epsilon);
        with_float!(self.dtype, WHAT, T => {
            let mut bufs: [Vec<<T as FloatElem>::C>; 3] = Default::default();
            let [xb, sb, bb] = &mut bufs;
            let xc = T::view(elems::<T>(x)?, xb);
            let scale = inputs.get(1).map(|t| elems::<T>(t)).transpose()?.map(|s| T::view(s, sb));
            let bias = inputs.get(2).map(|t| elems::<T>(t)).transpose()?.map(|s| T::view(s, bb));
            let (mean, inv) = statistics(&plan, xc, eps);
            T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                apply(&walk, [xc, &mean, scale.unwrap_or(&[]), bias.unwrap_or(&[])], &inv, oc)
            });
            Ok(())
        })
    }
}

/// Row-major strides of `shape` as `isize`.
fn signed_strides(shape: &[usize]) -> Vec<isize> {
    contiguous_strides(shape)
        .into_iter()
        .map(|s| s as isize)
        .collect()
}

/// Mean and `1 / √(var + eps)` of every group, in the order of the statistics' shape.
fn statistics<C: Real>(plan: &ReducePlan, x: &[C], eps: f64) -> (Vec<C>, Vec<C>) {
    let (inner, count) = (plan.inner, plan.reduced.len());
    let groups = plan.outer.len() * inner;
    let mut stats = vec![C::ZERO; 2 * groups];
    let n = C::from_f64(count as f64);
    let eps = C::from_f64(eps);
    for_each_row(
        &mut stats,
        2 * inner,
        2 * count * inner,
        Vec::new,
        |acc: &mut Vec<C>, o, dst| {
            let base = plan.outer[o];
            let (mean, inv) = dst.split_at_mut(inner);
            if inner == 1 && plan.reduced_is_contiguous() {
                let row = &x[base..base + count];
                let m = lane_sum(row) / n;
                acc.clear();
                acc.extend(row.iter().map(|&v| (v - m) * (v - m)));
                mean[0] = m;
                inv[0] = C::ONE / (lane_sum(acc) / n + eps).sqrt();
                return;
            }
            mean.fill(C::ZERO);
            for &r in &plan.reduced {
                for (m, &v) in mean.iter_mut().zip(&x[base + r..base + r + inner]) {
                    *m = *m + v;
                }
            }
            for m in mean.iter_mut() {
                *m = *m / n;
            }
            inv.fill(C::ZERO);
            for &r in &plan.reduced {
                let row = &x[base + r..base + r + inner];
                for ((s, &m), &v) in inv.iter_mut().zip(mean.iter()).zip(row) {
                    *s = *s + (v - m) * (v - m);
                }
            }
            for s in inv.iter_mut() {
                *s = C::ONE / (*s / n + eps).sqrt();
            }
        },
    );
    let (mut mean, mut inv) = (Vec::with_capacity(groups), Vec::with_capacity(groups));
    for row in stats.chunks_exact(2 * inner) {
        mean.extend_from_slice(&row[..inner]);
        inv.extend_from_slice(&row[inner..]);
    }
    (mean, inv)
}

/// `out = (x − mean) · inv · scale + bias`, reading `[x, mean, scale, bias]` through `walk`
/// (`inv` shares `mean`'s strides; an empty scale or bias is left out). Along a run `x`
/// steps by 1 (it has the output's shape) and the others by 0 or 1 (they broadcast to it),
/// so each step is a loop over slices or against one value.
fn apply<C: Real>(walk: &Strided<4>, src: [&[C]; 4], inv: &[C], out: &mut [C]) {
    let [x, mean, scale, bias] = src;
    let steps = walk.inner_strides();
    for_each_chunk(out, |start, chunk| {
        walk.for_each_run(start, start + chunk.len(), |o, at, len| {
            let dst = &mut chunk[o - start..o - start + len];
            let xs = &x[at[0]..at[0] + len];
            if steps[1] == 0 {
                let (m, r) = (mean[at[1]], inv[at[1]]);
                for (d, &v) in dst.iter_mut().zip(xs) {
                    *d = (v - m) * r;
                }
            } else {
                let (ms, rs) = (&mean[at[1]..at[1] + len], &inv[at[1]..at[1] + len]);
                for (((d, &v), &m), &r) in dst.iter_mut().zip(xs).zip(ms).zip(rs) {
                    *d = (v - m) * r;
                }
            }
            if !scale.is_empty() {
                along(dst, scale, at[2], steps[2], |y, s| y * s);
            }
            if !bias.is_empty() {
                along(dst, bias, at[3], steps[3], |y, b| y + b);
            }
        });
    });
}

/// `dst[j] = f(dst[j], src[at + j·step])` for a step of 0 or 1.
#[inline(always)]
fn along<C: Real>(dst: &mut [C], src: &[C], at: usize, step: isize, f: impl Fn(C, C) -> C) {
    if step == 0 {
        let v = src[at];
        for d in dst.iter_mut() {
            *d = f(*d, v);
        }
    } else {
        let n = dst.len();
        for (d, &v) in dst.iter_mut().zip(&src[at..at + n]) {
            *d = f(*d, v);
        }
    }
}
