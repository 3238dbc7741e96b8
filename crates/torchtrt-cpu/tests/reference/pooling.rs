//! Direct max and average pooling (ONNX `MaxPool` / `AveragePool`).

use super::{Nd, indices};

/// Pooling parameters, one value per spatial dim.
#[derive(Clone, Debug)]
pub struct PoolParams {
    /// Window.
    pub kernel: Vec<usize>,
    /// Strides.
    pub strides: Vec<usize>,
    /// Dilations.
    pub dilations: Vec<usize>,
    /// Leading pads.
    pub pads_begin: Vec<usize>,
    /// Trailing pads.
    pub pads_end: Vec<usize>,
    /// Round the output size up.
    pub ceil_mode: bool,
    /// Average divides by the taps inside the padded input, not only the real ones.
    pub count_include_pad: bool,
    /// Max pooling, else average (or Lp).
    pub max: bool,
    /// Lp pooling of this order instead of average.
    pub lp: Option<i64>,
}

/// The output extent along one dim: `(in + pads − d·(k−1) − 1) / s + 1`, rounded down or
/// (ceil mode) up unless the last window would start past the input and leading pad.
pub fn out_len(input: usize, p: &PoolParams, d: usize) -> usize {
    let span =
        (input + p.pads_begin[d] + p.pads_end[d] - p.dilations[d] * (p.kernel[d] - 1) - 1) as f64;
    let s = p.strides[d] as f64;
    let o = if p.ceil_mode {
        (span / s).ceil()
    } else {
        (span / s).floor()
    } as usize
        + 1;
    if p.ceil_mode && (o - 1) * p.strides[d] >= input + p.pads_begin[d] {
        o - 1
    } else {
        o
    }
}

/// Pools `x [N, C, spatial…]`.
pub fn pool(x: &Nd, p: &PoolParams) -> Nd {
    let spatial = x.shape.len() - 2;
    let mut shape = x.shape[..2].to_vec();
    shape.extend((0..spatial).map(|d| out_len(x.shape[2 + d], p, d)));
    Nd::from_fn(shape, |idx| {
        let (mut best, mut sum, mut real, mut padded) = (f64::NEG_INFINITY, 0.0, 0, 0);
        let mut norm = 0.0;
        for k in indices(&p.kernel) {
            let pos: Vec<isize> = (0..spatial)
                .map(|d| {
                    (idx[2 + d] * p.strides[d] + k[d] * p.dilations[d]) as isize
                        - p.pads_begin[d] as isize
                })
                .collect();
            let inside = (0..spatial).all(|d| pos[d] >= 0 && (pos[d] as usize) < x.shape[2 + d]);
            let in_pad = (0..spatial).all(|d| {
                pos[d] >= -(p.pads_begin[d] as isize)
                    && pos[d] < (x.shape[2 + d] + p.pads_end[d]) as isize
            });
            if in_pad {
                padded += 1;
            }
            if inside {
                let mut xi = idx[..2].to_vec();
                xi.extend(pos.iter().map(|&v| v as usize));
                let v = x.at(&xi);
                best = best.max(v);
                norm += v.abs().powi(p.lp.unwrap_or(1) as i32);
                sum += v;
                real += 1;
            }
        }
        let count = if p.count_include_pad { padded } else { real };
        if let Some(order) = p.lp {
            return norm.powf(1.0 / order as f64);
        }
        match (p.max, count) {
            (true, _) => best,
            (false, 0) => 0.0,
            (false, c) => sum / c as f64,
        }
    })
}
