//! A plain scalar reference for `torch_tensorrt::Interpolate`: every output element is
//! computed on its own, in `f64`, straight from the formulas of PyTorch's `F.interpolate` /
//! `adaptive_*_pool*d` and ONNX's `Resize` reference. Slow and obvious on purpose.

/// What the reference computes: the plugin's fields, as plain values.
#[derive(Clone, Debug)]
pub struct Spec {
    /// `mode` field.
    pub mode: String,
    /// `align_corners`.
    pub align_corners: bool,
    /// `coordinate_transformation_mode` (`""` for PyTorch's rule).
    pub coord: String,
    /// `nearest_mode` (`""` for PyTorch's floor).
    pub nearest: String,
    /// `cubic_coeff_a`.
    pub cubic_a: f64,
    /// `exclude_outside`.
    pub exclude_outside: bool,
    /// `antialias`.
    pub antialias: bool,
    /// Per-axis scales when the size comes from scales (`use_scales = 1`).
    pub scales: Option<Vec<f64>>,
}

impl Spec {
    /// A spec with every ONNX option at its default.
    pub fn new(mode: &str) -> Spec {
        Spec {
            mode: mode.to_string(),
            align_corners: false,
            coord: String::new(),
            nearest: String::new(),
            cubic_a: -0.75,
            exclude_outside: false,
            antialias: false,
            scales: None,
        }
    }
}

/// One axis: input length, output length, and the user's scale if any.
#[derive(Clone, Copy, Debug)]
struct Axis {
    input: usize,
    output: usize,
    scale: Option<f64>,
}

impl Axis {
    fn onnx_scale(&self) -> f64 {
        self.scale.unwrap_or(self.output as f64 / self.input as f64)
    }

    /// ONNX skips an axis whose length is unchanged at scale 1.
    fn onnx_identity(&self) -> bool {
        self.input == self.output && (self.onnx_scale() - 1.0).abs() <= 1e-9
    }
}

/// Keys' cubic kernel.
fn keys(a: f64, d: f64) -> f64 {
    let d = d.abs();
    if d <= 1.0 {
        (a + 2.0) * d.powi(3) - (a + 3.0) * d.powi(2) + 1.0
    } else if d < 2.0 {
        a * d.powi(3) - 5.0 * a * d.powi(2) + 8.0 * a * d - 4.0 * a
    } else {
        0.0
    }
}

/// The input coordinate of output `o` under an ONNX coordinate mode (ONNX's formulas).
fn onnx_coord(mode: &str, ax: Axis, o: usize) -> f64 {
    let x = o as f64;
    let s = ax.onnx_scale();
    let inp = ax.input as f64;
    let resized = ax.scale.map_or(ax.output as f64, |s| inp * s);
    match mode {
        "half_pixel" => (x + 0.5) / s - 0.5,
        "pytorch_half_pixel" if resized == 1.0 => -0.5,
        "pytorch_half_pixel" => (x + 0.5) / s - 0.5,
        "align_corners" if resized == 1.0 => 0.0,
        "align_corners" => x * (inp - 1.0) / (resized - 1.0),
        "tf_half_pixel_for_nn" => (x + 0.5) / s,
        "half_pixel_symmetric" => {
            let adjustment = ax.output as f64 / resized;
            inp / 2.0 * (1.0 - adjustment) + (x + 0.5) / s - 0.5
        }
        _ => x / s,
    }
}

/// PyTorch's source coordinate for linear (`clamp`) and cubic modes.
fn torch_coord(spec: &Spec, ax: Axis, o: usize, clamp: bool) -> f64 {
    if spec.align_corners {
        return if ax.output > 1 {
            o as f64 * (ax.input as f64 - 1.0) / (ax.output as f64 - 1.0)
        } else {
            0.0
        };
    }
    let ratio = match ax.scale {
        Some(s) => 1.0 / s,
        None => ax.input as f64 / ax.output as f64,
    };
    let x = ratio * (o as f64 + 0.5) - 0.5;
    if clamp { x.max(0.0) } else { x }
}

/// Taps `(position, weight)` with positions possibly outside the input; then excluded
/// (weight 0, renormalised) or clamped.
fn finish(mut taps: Vec<(i64, f64)>, input: usize, exclude: bool) -> Vec<(usize, f64)> {
    let last = input as i64 - 1;
    if exclude {
        for t in &mut taps {
            if t.0 < 0 || t.0 > last {
                t.1 = 0.0;
            }
        }
        let sum: f64 = taps.iter().map(|t| t.1).sum();
        if sum != 0.0 {
            taps.iter_mut().for_each(|t| t.1 /= sum);
        }
    }
    taps.into_iter()
        .map(|(p, w)| (p.clamp(0, last) as usize, w))
        .collect()
}

/// The weighted taps of output `o` along one axis for linear / cubic modes.
fn weighted_taps(spec: &Spec, ax: Axis, o: usize) -> Vec<(usize, f64)> {
    let cubic = spec.mode == "bicubic";
    let torch = spec.coord.is_empty();
    if !torch && ax.onnx_identity() {
        return vec![(o, 1.0)];
    }
    if spec.antialias {
        // ONNX stretches the filter by 1/scale when downsampling; PyTorch (empty
        // coordinate mode) by its area scale r, centred at r·(o + 0.5), with A = -0.5.
        let (x, s, a) = if torch {
            let r = if spec.align_corners {
                if ax.output > 1 {
                    (ax.input as f64 - 1.0) / (ax.output as f64 - 1.0)
                } else {
                    0.0
                }
            } else {
                ax.scale
                    .map_or(ax.input as f64 / ax.output as f64, |s| 1.0 / s)
            };
            (
                r * (o as f64 + 0.5) - 0.5,
                if r >= 1.0 { 1.0 / r } else { 1.0 },
                -0.5,
            )
        } else {
            (
                onnx_coord(&spec.coord, ax, o),
                ax.onnx_scale().min(1.0),
                spec.cubic_a,
            )
        };
        let support = if cubic { 2.0 } else { 1.0 };
        let reach = support / s;
        let lo = (x - reach).floor() as i64 - 1;
        let hi = (x + reach).ceil() as i64 + 1;
        let mut taps: Vec<(i64, f64)> = (lo..=hi)
            .map(|p| {
                let d = (p as f64 - x) * s;
                let w = if cubic {
                    keys(a, d)
                } else {
                    (1.0 - d.abs()).max(0.0)
                };
                (p, w)
            })
            .filter(|t| t.1 != 0.0)
            .collect();
        let sum: f64 = taps.iter().map(|t| t.1).sum();
        taps.iter_mut().for_each(|t| t.1 /= sum);
        return finish(taps, ax.input, spec.exclude_outside || torch);
    }
    let x = if torch {
        torch_coord(spec, ax, o, !cubic)
    } else {
        onnx_coord(&spec.coord, ax, o)
    };
    let base = x.floor() as i64;
    let taps: Vec<(i64, f64)> = if cubic {
        (base - 1..=base + 2)
            .map(|p| (p, keys(spec.cubic_a, x - p as f64)))
            .collect()
    } else {
        let t = x - base as f64;
        vec![(base, 1.0 - t), (base + 1, t)]
    };
    finish(taps, ax.input, spec.exclude_outside)
}

/// The nearest input index of output `o` along one axis.
fn nearest_index(spec: &Spec, ax: Axis, o: usize) -> usize {
    let last = ax.input - 1;
    if spec.coord.is_empty() && spec.nearest.is_empty() {
        if ax.output == ax.input {
            return o;
        }
        if ax.output == 2 * ax.input {
            return o / 2;
        }
        // PyTorch computes this index in f32.
        let ratio = match ax.scale {
            Some(s) => (1.0 / s) as f32,
            None => ax.input as f32 / ax.output as f32,
        };
        return ((o as f32 * ratio).floor() as usize).min(last);
    }
    if !spec.coord.is_empty() && ax.onnx_identity() {
        return o;
    }
    let x = onnx_coord(&spec.coord, ax, o);
    let fl = x.floor();
    let frac = x - fl;
    let up = frac != 0.0
        && match spec.nearest.as_str() {
            "ceil" => true,
            "round_prefer_floor" => frac > 0.5,
            "round_prefer_ceil" => frac >= 0.5,
            _ => false,
        };
    (fl as i64 + i64::from(up)).clamp(0, last as i64) as usize
}

/// The adaptive pooling window of output `o`.
fn window(ax: Axis, o: usize) -> std::ops::Range<usize> {
    let start = (o * ax.input) / ax.output;
    let end = ((o + 1) * ax.input).div_ceil(ax.output);
    start..end
}

/// Resizes or pools `x` (shape `[n, c, spatial…]`) to the spatial size `out`.
pub fn resize(spec: &Spec, shape: &[usize], x: &[f64], out: &[usize]) -> Vec<f64> {
    let k = shape.len() - 2;
    let planes = shape[0] * shape[1];
    let axes: Vec<Axis> = (0..k)
        .map(|a| Axis {
            input: shape[2 + a],
            output: out[a],
            scale: spec.scales.as_ref().map(|s| s[a]),
        })
        .collect();
    let in_plane: usize = shape[2..].iter().product();
    let out_plane: usize = out.iter().product();
    let mut result = Vec::with_capacity(planes * out_plane);
    for p in 0..planes {
        let plane = &x[p * in_plane..(p + 1) * in_plane];
        for flat in 0..out_plane {
            let mut o = vec![0; k];
            let mut rem = flat;
            for a in (0..k).rev() {
                o[a] = rem % out[a];
                rem /= out[a];
            }
            result.push(element(spec, &axes, &shape[2..], plane, &o));
        }
    }
    result
}

/// One output element at spatial index `o`.
fn element(spec: &Spec, axes: &[Axis], dims: &[usize], plane: &[f64], o: &[usize]) -> f64 {
    let offset = |idx: &[usize]| idx.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i);
    let mode = spec.mode.as_str();
    if mode == "nearest" {
        let idx: Vec<usize> = axes
            .iter()
            .zip(o)
            .map(|(&ax, &oa)| nearest_index(spec, ax, oa))
            .collect();
        return plane[offset(&idx)];
    }
    if mode.starts_with("adaptive") {
        let wins: Vec<Vec<usize>> = axes
            .iter()
            .zip(o)
            .map(|(&ax, &oa)| window(ax, oa).collect())
            .collect();
        let values: Vec<f64> = product(&wins)
            .iter()
            .map(|idx| plane[offset(idx)])
            .collect();
        return if mode.starts_with("adaptive_avg") {
            values.iter().sum::<f64>() / values.len() as f64
        } else {
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        };
    }
    let taps: Vec<Vec<(usize, f64)>> = axes
        .iter()
        .zip(o)
        .map(|(&ax, &oa)| weighted_taps(spec, ax, oa))
        .collect();
    let idx_lists: Vec<Vec<usize>> = taps.iter().map(|t| (0..t.len()).collect()).collect();
    product(&idx_lists)
        .iter()
        .map(|choice| {
            let idx: Vec<usize> = choice.iter().zip(&taps).map(|(&c, t)| t[c].0).collect();
            let w: f64 = choice.iter().zip(&taps).map(|(&c, t)| t[c].1).product();
            w * plane[offset(&idx)]
        })
        .sum()
}

/// The cartesian product of lists.
fn product(lists: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for list in lists {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                list.iter().map(move |&v| {
                    let mut p = prefix.clone();
                    p.push(v);
                    p
                })
            })
            .collect();
    }
    out
}
