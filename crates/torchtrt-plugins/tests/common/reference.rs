//! Plain f64 references for the plugins: every output element computed on its own,
//! straight from the definitions. Slow and obvious on purpose.

#![allow(dead_code)]

/// `erfc(z)` for any `z`: `1 - erf(z)` from the all-positive Taylor series of
/// `erf(z) e^{z²}` below 3, the Laplace continued fraction above.
pub fn erfc(z: f64) -> f64 {
    if z < 0.0 {
        return 2.0 - erfc(-z);
    }
    if z < 3.0 {
        let mut term = z;
        let mut sum = z;
        for n in 1..200 {
            term *= 2.0 * z * z / (2 * n + 1) as f64;
            sum += term;
            if term < sum * 1e-18 {
                break;
            }
        }
        return 1.0 - 2.0 / std::f64::consts::PI.sqrt() * (-z * z).exp() * sum;
    }
    let mut k = 0.0;
    for n in (1..200).rev() {
        k = (n as f64 / 2.0) / (z + k);
    }
    (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + k)
}

/// GELU: `x Φ(x)` (exact) or the tanh approximation `x (1 + tanh u) / 2`, written as
/// `x / (1 + e^(-2u))` (the same function) so f64 keeps its precision for negative `x`.
pub fn gelu(x: f64, tanh: bool) -> f64 {
    if tanh {
        let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
        x / (1.0 + (-2.0 * u).exp())
    } else {
        x * 0.5 * erfc(-x / std::f64::consts::SQRT_2)
    }
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
    idx
}

/// Instance normalisation of `[N, C, …]`: per (n, c) mean and biased variance, then
/// `(x - mean) / sqrt(var + eps) * scale[c] + bias[c]`, then `leaky` (a slope) if given.
pub fn instance_norm(
    x: &[f64],
    shape: &[usize],
    scales: &[f64],
    bias: &[f64],
    eps: f64,
    leaky: Option<f64>,
) -> Vec<f64> {
    let plane: usize = shape[2..].iter().product();
    let c_count = shape[1];
    let mut y = vec![0.0; x.len()];
    for (p, (xs, ys)) in x.chunks(plane).zip(y.chunks_mut(plane)).enumerate() {
        let c = p % c_count;
        let mean = xs.iter().sum::<f64>() / plane as f64;
        let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / plane as f64;
        for (o, v) in ys.iter_mut().zip(xs) {
            let r = (v - mean) / (var + eps).sqrt() * scales[c] + bias[c];
            *o = match leaky {
                Some(a) if r < 0.0 => r * a,
                _ => r,
            };
        }
    }
    y
}

/// The `p`-norm (`p` = `f64::INFINITY` for the max norm) over the dimensions flagged in
/// `reduce`; one value per kept-dimension index, kept dimensions in order.
pub fn norm(x: &[f64], shape: &[usize], reduce: &[bool], p: f64) -> Vec<f64> {
    let kept: Vec<usize> = (0..shape.len()).filter(|&i| !reduce[i]).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&i| shape[i]).collect();
    let kept_strides = strides(&kept_shape);
    let mut acc = vec![0.0f64; kept_shape.iter().product()];
    for (flat, &v) in x.iter().enumerate() {
        let idx = unravel(flat, shape);
        let o: usize = kept
            .iter()
            .zip(&kept_strides)
            .map(|(&k, &s)| idx[k] * s)
            .sum();
        if p.is_infinite() {
            acc[o] = acc[o].max(v.abs());
        } else {
            acc[o] += v.abs().powf(p);
        }
    }
    if !p.is_infinite() {
        acc.iter_mut().for_each(|a| *a = a.powf(1.0 / p));
    }
    acc
}

/// `x / max(‖x‖ₚ, eps)` with the norm over the dimensions flagged in `reduce`.
pub fn normalize(x: &[f64], shape: &[usize], reduce: &[bool], p: f64, eps: f64) -> Vec<f64> {
    let n = norm(x, shape, reduce, p);
    let kept: Vec<usize> = (0..shape.len()).filter(|&i| !reduce[i]).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&i| shape[i]).collect();
    let kept_strides = strides(&kept_shape);
    x.iter()
        .enumerate()
        .map(|(flat, &v)| {
            let idx = unravel(flat, shape);
            let o: usize = kept
                .iter()
                .zip(&kept_strides)
                .map(|(&k, &s)| idx[k] * s)
                .sum();
            v / n[o].max(eps)
        })
        .collect()
}
