//! Mean/variance normalization by its definition.

use super::{Nd, indices, ravel};

/// The reference and the smallest `√(var + eps)` of any group (how much rounding of `x`
/// is amplified).
pub fn normalize(
    x: &Nd,
    axes: &[usize],
    eps: f64,
    scale: Option<&Nd>,
    bias: Option<&Nd>,
) -> (Nd, f64) {
    let group_of = |idx: &[usize]| -> Vec<usize> {
        idx.iter()
            .enumerate()
            .map(|(d, &i)| if axes.contains(&d) { 0 } else { i })
            .collect()
    };
    let stats_shape: Vec<usize> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let groups: usize = stats_shape.iter().product();
    let count = (x.data.len() / groups.max(1)) as f64;
    let (mut sum, mut sq) = (vec![0.0; groups], vec![0.0; groups]);
    for idx in indices(&x.shape) {
        sum[ravel(&group_of(&idx), &stats_shape)] += x.at(&idx);
    }
    let mean: Vec<f64> = sum.iter().map(|s| s / count).collect();
    for idx in indices(&x.shape) {
        let g = ravel(&group_of(&idx), &stats_shape);
        sq[g] += (x.at(&idx) - mean[g]).powi(2);
    }
    let std: Vec<f64> = sq.iter().map(|s| (s / count + eps).sqrt()).collect();
    let at = |t: &Nd, idx: &[usize]| {
        let lead = idx.len() - t.shape.len();
        let i: Vec<usize> = t
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
            .collect();
        t.at(&i)
    };
    let y = Nd::from_fn(x.shape.clone(), |idx| {
        let g = ravel(&group_of(idx), &stats_shape);
        let mut v = (x.at(idx) - mean[g]) / std[g];
        if let Some(s) = scale {
            v *= at(s, idx);
        }
        if let Some(b) = bias {
            v += at(b, idx);
        }
        v
    });
    (y, std.iter().copied().fold(f64::INFINITY, f64::min))
}

/// `x / √(mean(x²) + eps) · scale` over `axes` (RMS normalization), `scale` broadcast.
pub fn rms_normalize(x: &Nd, axes: &[usize], eps: f64, scale: &Nd) -> Nd {
    let stats_shape: Vec<usize> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let group_of = |idx: &[usize]| -> usize {
        let g: Vec<usize> = idx
            .iter()
            .enumerate()
            .map(|(d, &i)| if axes.contains(&d) { 0 } else { i })
            .collect();
        ravel(&g, &stats_shape)
    };
    let groups: usize = stats_shape.iter().product();
    let count = (x.data.len() / groups.max(1)) as f64;
    let mut sq = vec![0.0; groups];
    for idx in indices(&x.shape) {
        sq[group_of(&idx)] += x.at(&idx).powi(2);
    }
    Nd::from_fn(x.shape.clone(), |idx| {
        let lead = idx.len() - scale.shape.len();
        let s: Vec<usize> = scale
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
            .collect();
        x.at(idx) / (sq[group_of(idx)] / count + eps).sqrt() * scale.at(&s)
    })
}
