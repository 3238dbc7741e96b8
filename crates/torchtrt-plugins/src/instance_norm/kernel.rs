//! The instance-normalisation CPU kernel: per plane one fused pass for the mean and variance
//! (f32 lanes flushed into f64), then one pass applying the affine map and (leaky) relu.

use rayon::prelude::*;

use crate::kernels::simd::multiversion;
use crate::kernels::{Float, par};

/// Lanes of the statistics accumulators.
const LANES: usize = 32;
/// Elements summed in f32 before flushing into f64.
const FLUSH: usize = 1024;

/// What the kernel applies after normalising.
pub(crate) struct Params<'a> {
    /// Per-channel scale.
    pub(crate) scales: &'a [f32],
    /// Per-channel bias.
    pub(crate) bias: &'a [f32],
    /// Added to the variance.
    pub(crate) epsilon: f32,
    /// `Some(alpha)`: negative outputs are multiplied by `alpha` (0 is a plain relu).
    pub(crate) leaky_slope: Option<f32>,
}

/// Normalises `x` (planes of `plane` elements, channel = plane index mod `scales.len()`)
/// into `y`.
pub(crate) fn instance_norm<T: Float>(x: &[T], y: &mut [T], plane: usize, p: &Params<'_>) {
    let channels = p.scales.len();
    if plane == 0 || channels == 0 || x.is_empty() {
        return;
    }
    let planes = x.len() / plane;
    let plane_bytes = plane * std::mem::size_of::<T>();
    let many_planes = planes >= 2 * rayon::current_num_threads();
    if many_planes || plane_bytes <= 2 * par::MIN_TASK_BYTES {
        let group = par::chunk_len(planes, plane_bytes);
        y.par_chunks_mut(group * plane)
            .zip(x.par_chunks(group * plane))
            .enumerate()
            .for_each(|(g, (y, x))| {
                for (i, (y, x)) in y.chunks_mut(plane).zip(x.chunks(plane)).enumerate() {
                    let c = (g * group + i) % channels;
                    let shift = x[0].to_f32();
                    let (sum, sq) = stats(x, shift);
                    let (mean, scale) = normalizer((sum, sq, shift), plane, c, p);
                    apply(x, y, mean, scale, p.bias[c], p.leaky_slope);
                }
            });
    } else {
        for (i, (y, x)) in y.chunks_mut(plane).zip(x.chunks(plane)).enumerate() {
            split_plane(x, y, i % channels, p);
        }
    }
}

/// One large plane, its statistics and its application split over the pool.
fn split_plane<T: Float>(x: &[T], y: &mut [T], c: usize, p: &Params<'_>) {
    let chunk = par::chunk_len(x.len(), std::mem::size_of::<T>());
    let shift = x[0].to_f32();
    let (sum, sq) = x
        .par_chunks(chunk)
        .map(|x| stats(x, shift))
        .reduce(|| (0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    let (mean, scale) = normalizer((sum, sq, shift), x.len(), c, p);
    y.par_chunks_mut(chunk)
        .zip(x.par_chunks(chunk))
        .for_each(|(y, x)| apply(x, y, mean, scale, p.bias[c], p.leaky_slope));
}

/// The plane's mean as an f32 pair `(hi, lo)` (so `x - hi - lo` keeps the precision of the
/// deviations however large the mean) and `scale[c] / sqrt(var + eps)`, from shifted sums.
fn normalizer(
    (sum, sq, shift): (f64, f64, f32),
    n: usize,
    c: usize,
    p: &Params<'_>,
) -> ((f32, f32), f32) {
    let n = n as f64;
    let d_mean = sum / n;
    let var = (sq / n - d_mean * d_mean).max(0.0);
    let rstd = 1.0 / (var + f64::from(p.epsilon)).sqrt();
    let mean = f64::from(shift) + d_mean;
    let hi = mean as f32;
    let lo = (mean - f64::from(hi)) as f32;
    ((hi, lo), (f64::from(p.scales[c]) * rstd) as f32)
}

multiversion! {
    /// Sum and sum of squares of `x - shift`.
    fn stats<M: Madd, T: Float>(x: &[T], shift: f32) -> (f64, f64) {
        let mut sum = 0f64;
        let mut sq = 0f64;
        for block in x.chunks(FLUSH) {
            let mut s = [0f32; LANES];
            let mut q = [0f32; LANES];
            let (full, rest) = block.as_chunks::<LANES>();
            for c in full {
                for ((sl, ql), v) in s.iter_mut().zip(q.iter_mut()).zip(c) {
                    let d = v.to_f32() - shift;
                    *sl += d;
                    *ql = M::madd(d, d, *ql);
                }
            }
            for ((sl, ql), v) in s.iter_mut().zip(q.iter_mut()).zip(rest) {
                let d = v.to_f32() - shift;
                *sl += d;
                *ql = M::madd(d, d, *ql);
            }
            sum += s.iter().map(|&v| f64::from(v)).sum::<f64>();
            sq += q.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        (sum, sq)
    }
}

multiversion! {
    /// `y = (x - mean) * scale + bias`, then the optional leaky relu; `mean` is `hi + lo`.
    fn apply<M: Madd, T: Float>(
        x: &[T],
        y: &mut [T],
        mean: (f32, f32),
        scale: f32,
        bias: f32,
        leaky_slope: Option<f32>,
    ) {
        let (mean, mean_lo) = mean;
        match leaky_slope {
            None => {
                for (o, &v) in y.iter_mut().zip(x) {
                    *o = T::from_f32(M::madd(v.to_f32() - mean - mean_lo, scale, bias));
                }
            }
            Some(alpha) => {
                for (o, &v) in y.iter_mut().zip(x) {
                    let r = M::madd(v.to_f32() - mean - mean_lo, scale, bias);
                    *o = T::from_f32(if r < 0.0 { r * alpha } else { r });
                }
            }
        }
    }
}
