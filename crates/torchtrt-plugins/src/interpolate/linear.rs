//! Linear interpolation taps (`linear`, `bilinear`, `trilinear`; ONNX `linear`).

use super::antialias::{self, Filter};
use super::config::Config;
use super::coord::{AxisGeom, CoordMode};
use super::taps::AxisTaps;

/// The two-tap table of one axis (or the antialias table when `antialias` is set).
pub fn taps(config: &Config, axis: &AxisGeom) -> AxisTaps {
    if config.antialias {
        return antialias::taps(config, axis, Filter::Linear);
    }
    if config.coord != CoordMode::PyTorch && axis.is_onnx_identity() {
        return AxisTaps::identity(axis.input);
    }
    let mut t = AxisTaps::with_taps(2, axis.input, axis.output);
    for o in 0..axis.output {
        let x = config.coord.source(axis, o, config.align_corners, true);
        let base = x.floor();
        let f = x - base;
        t.push_window(base as i64, &mut [1.0 - f, f], config.exclude_outside);
    }
    t.finish()
}
