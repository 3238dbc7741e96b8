//! Nearest-neighbour sampling: one input index per output index and axis, applied by
//! copying elements (no conversion) and whole rows where consecutive output rows share a
//! source row.

use std::ops::Range;

use super::config::Config;
use super::coord::{AxisGeom, CoordMode, NearestMode};

/// The source index of every output index along one axis.
///
/// Under PyTorch's rule (both `coordinate_transformation_mode` and `nearest_mode` empty)
/// this is PyTorch's `nearest_idx`: identity for equal sizes, `o/2` for exact doubling,
/// else `min(floor(o·ratio), in − 1)` in `f32`. Otherwise it is ONNX's: the coordinate
/// mode's `f64` coordinate, rounded by the nearest mode, clamped into the input.
pub fn indices(config: &Config, axis: &AxisGeom) -> Vec<usize> {
    let last = axis.input - 1;
    let pytorch = config.coord == CoordMode::PyTorch && config.nearest == NearestMode::PyTorch;
    if pytorch {
        if axis.output == axis.input {
            return (0..axis.output).collect();
        }
        if axis.output == 2 * axis.input {
            return (0..axis.output).map(|o| o / 2).collect();
        }
        let ratio = axis.pytorch_ratio();
        return (0..axis.output)
            .map(|o| ((o as f32 * ratio).floor() as usize).min(last))
            .collect();
    }
    if config.coord != CoordMode::PyTorch && axis.is_onnx_identity() {
        return (0..axis.output).collect();
    }
    (0..axis.output)
        .map(|o| {
            let x = config.coord.onnx_source(axis, o);
            config.nearest.pick(x).clamp(0, last as i64) as usize
        })
        .collect()
}

/// Samples the plane `src` (input dims `dims`, outermost first) into `dst`: the outputs
/// `outer` of the outermost axis and every output of the inner axes. `index[a]` holds the
/// source indices of axis `a`.
pub fn plane<T: Copy>(
    index: &[Vec<usize>],
    dims: &[usize],
    src: &[T],
    outer: Range<usize>,
    dst: &mut [T],
) {
    let Some((cols, lead)) = index.split_last() else {
        return;
    };
    if lead.is_empty() {
        for (d, &i) in dst.iter_mut().zip(&cols[outer]) {
            *d = src[i];
        }
        return;
    }
    let width = cols.len();
    let mut strides = vec![0usize; lead.len()];
    let mut stride = dims[dims.len() - 1];
    for a in (0..lead.len()).rev() {
        strides[a] = stride;
        stride *= dims[a];
    }
    let mut counter: Vec<usize> = lead.iter().map(|_| 0).collect();
    counter[0] = outer.start;
    let mut prev = usize::MAX;
    let rows = dst.len() / width.max(1);
    for r in 0..rows {
        let from: usize = counter
            .iter()
            .zip(lead)
            .zip(&strides)
            .map(|((&c, idx), &s)| idx[c] * s)
            .sum();
        let (done, rest) = dst.split_at_mut(r * width);
        let row = &mut rest[..width];
        if from == prev {
            row.copy_from_slice(&done[(r - 1) * width..]);
        } else {
            let s = &src[from..from + dims[dims.len() - 1]];
            for (d, &i) in row.iter_mut().zip(cols) {
                *d = s[i];
            }
        }
        prev = from;
        for a in (0..lead.len()).rev() {
            counter[a] += 1;
            if a == 0 || counter[a] < lead[a].len() {
                break;
            }
            counter[a] = 0;
        }
    }
}
