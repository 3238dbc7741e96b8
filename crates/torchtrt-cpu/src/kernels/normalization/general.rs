//! Normalization in two phases, for any axes and any broadcast scale and bias: the mean
//! and `1 / √(var + eps)` of every group first, then one broadcast pass
//! `(x − mean) · inv_std · scale + bias`.

use super::WHAT;
use crate::kernels::reduce::ReducePlan;
use crate::parallel::{for_each_chunk, for_each_row};
use crate::scalar::{Real, lane_sum};
use crate::strided::{Strided, broadcast_strides};
use crate::tensor_access::contiguous_strides;

/// The walk over the output that reads `[x, statistics, scale, bias]`, for a normalization
/// of `shape` over `axes` with parameters of shapes `params`.
pub(super) fn walk(
    shape: &[usize],
    axes: &[usize],
    params: &[&[usize]],
) -> Result<Strided<4>, String> {
    let stats_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let stat = broadcast_strides(&stats_shape, shape)?;
    let mut strides: Vec<[isize; 4]> = stat.iter().map(|&s| [0, s, 0, 0]).collect();
    let contiguous = signed_strides(shape);
    for (d, s) in strides.iter_mut().enumerate() {
        s[0] = contiguous[d];
    }
    for (k, p) in params.iter().enumerate() {
        let bs = broadcast_strides(p, shape)
            .map_err(|e| format!("{WHAT}: {} {e}", ["scale", "bias"][k]))?;
        for (s, b) in strides.iter_mut().zip(bs) {
            s[2 + k] = b;
        }
    }
    Ok(Strided::new(shape, &strides, [0; 4]))
}

/// Row-major strides of `shape` as `isize`.
fn signed_strides(shape: &[usize]) -> Vec<isize> {
    contiguous_strides(shape)
        .into_iter()
        .map(|s| s as isize)
        .collect()
}

/// Mean and `1 / √(var + eps)` of every group, in the order of the statistics' shape.
/// With `rms` the mean is taken as 0 (root-mean-square normalization).
pub(super) fn statistics<C: Real>(
    plan: &ReducePlan,
    x: &[C],
    eps: f64,
    rms: bool,
) -> (Vec<C>, Vec<C>) {
    let (inner, count, run) = (plan.inner, plan.count(), plan.run);
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
            let base = plan.outer.get(o);
            let (mean, inv) = dst.split_at_mut(inner);
            if plan.is_one_run() {
                let row = &x[base..base + count];
                let m = if rms { C::ZERO } else { lane_sum(row) / n };
                acc.clear();
                acc.extend(row.iter().map(|&v| (v - m) * (v - m)));
                mean[0] = m;
                inv[0] = C::ONE / (lane_sum(acc) / n + eps).sqrt();
                return;
            }
            let rows = || {
                plan.starts.range(0..plan.starts.len()).flat_map(move |s| {
                    (0..run).map(move |k| &x[base + s + k..base + s + k + inner])
                })
            };
            mean.fill(C::ZERO);
            if !rms {
                for row in rows() {
                    for (m, &v) in mean.iter_mut().zip(row) {
                        *m = *m + v;
                    }
                }
                for m in mean.iter_mut() {
                    *m = *m / n;
                }
            }
            inv.fill(C::ZERO);
            for row in rows() {
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
pub(super) fn apply<C: Real>(walk: &Strided<4>, src: [&[C]; 4], inv: &[C], out: &mut [C]) {
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
