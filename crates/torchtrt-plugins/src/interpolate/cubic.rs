//! Cubic convolution taps (`bicubic`; ONNX `cubic`), Keys' kernel with coefficient `A`.

use super::antialias::{self, Filter};
use super::config::Config;
use super::coord::{AxisGeom, CoordMode};
use super::taps::AxisTaps;

/// Keys' cubic convolution kernel with coefficient `a` at distance `x`.
pub fn weight(a: f64, x: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// The four-tap table of one axis (or the antialias table when `antialias` is set).
/// Coordinates are not clamped; taps beyond the edges replicate the edge, or are excluded
/// with `exclude_outside`.
pub fn taps(config: &Config, axis: &AxisGeom) -> AxisTaps {
    let a = f64::from(config.cubic_a);
    if config.antialias {
        return antialias::taps(config, axis, Filter::Cubic(a));
    }
    if config.coord != CoordMode::PyTorch && axis.is_onnx_identity() {
        return AxisTaps::identity(axis.input);
    }
    let mut t = AxisTaps::with_taps(4, axis.input, axis.output);
    for o in 0..axis.output {
        let x = config.coord.source(axis, o, config.align_corners, false);
        let base = x.floor();
        let f = x - base;
        let mut w = [
            weight(a, f + 1.0),
            weight(a, f),
            weight(a, 1.0 - f),
            weight(a, 2.0 - f),
        ];
        t.push_window(base as i64 - 1, &mut w, config.exclude_outside);
    }
    t.finish()
}
