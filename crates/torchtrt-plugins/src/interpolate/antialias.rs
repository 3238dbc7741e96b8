//! Antialiased taps for linear and cubic downsampling.
//!
//! ONNX opset 18 (`coordinate_transformation_mode` set): when `scale < 1` the filter is
//! stretched by `1/scale`, widening it to `2·ceil(support/scale)` taps around the mode's
//! coordinate, normalised to sum 1; `exclude_outside` as given. Upsampling gives the plain
//! filter.
//!
//! PyTorch's rule (`coordinate_transformation_mode` empty) follows
//! `F.interpolate(..., antialias=True)`: the centre of output `o` is `r·(o + 0.5)` with
//! `r` = PyTorch's `area_pixel_compute_scale` (so also with `align_corners`), the filter
//! is stretched by `max(r, 1)`, taps outside the input are excluded, and bicubic uses
//! PyTorch's antialias coefficient `A = −0.5` (`cubic_coeff_a` is not used).

use super::config::Config;
use super::coord::{AxisGeom, CoordMode};
use super::cubic;
use super::taps::AxisTaps;

/// PyTorch's cubic coefficient for antialiased bicubic.
const PYTORCH_AA_CUBIC_A: f64 = -0.5;

/// The filter being stretched.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Filter {
    /// The triangle (linear) filter, support 1.
    Linear,
    /// Keys' cubic with coefficient `A`, support 2.
    Cubic(f64),
}

impl Filter {
    fn support(self) -> f64 {
        match self {
            Filter::Linear => 1.0,
            Filter::Cubic(_) => 2.0,
        }
    }

    fn eval(self, x: f64) -> f64 {
        match self {
            Filter::Linear => (1.0 - x.abs()).clamp(0.0, 1.0),
            Filter::Cubic(a) => cubic::weight(a, x),
        }
    }
}

/// The antialiased table of one axis.
pub fn taps(config: &Config, axis: &AxisGeom, filter: Filter) -> AxisTaps {
    let pytorch = config.coord == CoordMode::PyTorch;
    if !pytorch && axis.is_onnx_identity() {
        return AxisTaps::identity(axis.input);
    }
    let (scale, filter, exclude) = if pytorch {
        let r = axis.pytorch_scale(config.align_corners);
        let filter = match filter {
            Filter::Cubic(_) => Filter::Cubic(PYTORCH_AA_CUBIC_A),
            f => f,
        };
        (if r >= 1.0 { 1.0 / r } else { 1.0 }, filter, true)
    } else {
        (axis.onnx_scale().min(1.0), filter, config.exclude_outside)
    };
    let start = (-filter.support() / scale).floor() as i64 + 1;
    let n = (2 - 2 * start) as usize;
    let mut t = AxisTaps::with_taps(n, axis.input, axis.output);
    let mut w = vec![0.0; n];
    for o in 0..axis.output {
        let x = if pytorch {
            axis.pytorch_scale(config.align_corners) * (o as f64 + 0.5) - 0.5
        } else {
            config.coord.onnx_source(axis, o)
        };
        let base = x.ceil() - 1.0;
        let ratio = x - base;
        for (k, wk) in w.iter_mut().enumerate() {
            *wk = filter.eval(((start + k as i64) as f64 - ratio) * scale);
        }
        let sum: f64 = w.iter().sum();
        if sum != 0.0 {
            w.iter_mut().for_each(|wk| *wk /= sum);
        }
        t.push_window(base as i64 + start, &mut w, exclude);
    }
    t.finish()
}
