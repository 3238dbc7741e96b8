//! Nearest-neighbour sampling: one input index per output index and axis, applied by
//! copying elements (no conversion) and whole rows where consecutive output rows share a
//! source row.

use std::ops::Range;

use super::config::Config;
use super::coord::{AxisGeom, CoordMode, NearestMode};
use super::poly::{self, Periodic};
use crate::kernels::simd::multiversion;

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

/// The source indices of every axis of a plane, and what the kernel needs besides.
pub struct NearestPlan {
    index: Vec<Vec<usize>>,
    dims: Vec<usize>,
    periodic: Option<Periodic>,
}

impl NearestPlan {
    /// A plan from per-axis source indices (outermost first) and the input's spatial dims.
    pub fn new(index: Vec<Vec<usize>>, dims: Vec<usize>) -> NearestPlan {
        let periodic = index.last().and_then(|cols| Periodic::detect(cols, &[], 1));
        NearestPlan {
            index,
            dims,
            periodic,
        }
    }

    /// Samples the plane `src` into `dst`: the outputs `outer` of the outermost axis and
    /// every output of the inner axes.
    pub fn plane<T: Copy>(&self, src: &[T], outer: Range<usize>, dst: &mut [T]) {
        sample(self, src, outer, dst);
    }
}

multiversion! {
    /// [`NearestPlan::plane`], dispatched once on the shape of the periodic interior.
    fn sample<M: Madd, T: Copy>(
        plan: &NearestPlan,
        src: &[T],
        outer: Range<usize>,
        dst: &mut [T],
    ) {
        match plan.periodic.as_ref().and_then(poly::repeat_shape) {
            Some((2, 1)) => sample_k::<T, 2, 1>(plan, src, outer, dst),
            Some((3, 1)) => sample_k::<T, 3, 1>(plan, src, outer, dst),
            Some((4, 1)) => sample_k::<T, 4, 1>(plan, src, outer, dst),
            Some((1, 2)) => sample_k::<T, 1, 2>(plan, src, outer, dst),
            Some((1, 3)) => sample_k::<T, 1, 3>(plan, src, outer, dst),
            Some((1, 4)) => sample_k::<T, 1, 4>(plan, src, outer, dst),
            _ => sample_k::<T, 0, 0>(plan, src, outer, dst),
        }
    }
}

/// Samples a plane row by row; output rows sharing a source row are copies of the first.
/// `P, A` name the periodic interior's [`poly::repeat`] kernel (`0, 0`: none).
#[inline(always)]
fn sample_k<T: Copy, const P: usize, const A: usize>(
    plan: &NearestPlan,
    src: &[T],
    outer: Range<usize>,
    dst: &mut [T],
) {
    let Some((cols, lead)) = plan.index.split_last() else {
        return;
    };
    let dims = &plan.dims;
    let row_len = dims[dims.len() - 1];
    if lead.is_empty() {
        row::<T, P, A>(plan, src, outer, dst);
        return;
    }
    let width = cols.len();
    let mut strides = vec![0usize; lead.len()];
    let mut stride = row_len;
    for a in (0..lead.len()).rev() {
        strides[a] = stride;
        stride *= dims[a];
    }
    let mut counter = vec![0usize; lead.len()];
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
        let out = &mut rest[..width];
        if from == prev {
            out.copy_from_slice(&done[(r - 1) * width..]);
        } else {
            row::<T, P, A>(plan, &src[from..from + row_len], 0..width, out);
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

/// Samples outputs `outputs` of one row.
#[inline(always)]
fn row<T: Copy, const P: usize, const A: usize>(
    plan: &NearestPlan,
    src: &[T],
    outputs: Range<usize>,
    dst: &mut [T],
) {
    let Some(cols) = plan.index.last() else {
        return;
    };
    let at = |r: &Range<usize>| r.start - outputs.start..r.end - outputs.start;
    let gather = |r: Range<usize>, d: &mut [T]| {
        for (d, &i) in d.iter_mut().zip(&cols[r]) {
            *d = src[i];
        }
    };
    if let (Some(p), true) = (&plan.periodic, P > 0) {
        let (head, mid, tail) = p.split(outputs.clone());
        if !mid.is_empty()
            && poly::repeat::<T, P, A>(&src[p.input_of(mid.start)..], &mut dst[at(&mid)])
        {
            gather(head.clone(), &mut dst[at(&head)]);
            gather(tail.clone(), &mut dst[at(&tail)]);
            return;
        }
    }
    gather(outputs, dst);
}
