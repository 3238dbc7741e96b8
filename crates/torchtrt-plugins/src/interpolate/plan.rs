//! The per-launch plan: the mode's per-axis tables for concrete input and output sizes.

use std::ops::Range;

use super::config::Config;
use super::coord::AxisGeom;
use super::maxpool::MaxPool2dPlan;
use super::mode::Mode;
use super::nearest::NearestPlan;
use super::passes::Reduce;
use super::separable::{Scratch, SeparablePlan};
use super::taps::AxisTaps;
use super::{cubic, linear, nearest, pool};
use crate::kernels::float::Float;

/// The tables of one launch, shared by every plane.
pub enum Plan {
    /// Nearest sampling.
    Nearest(NearestPlan),
    /// Separable resampling or pooling.
    Separable(SeparablePlan),
    /// Two-dimensional adaptive max pooling.
    MaxPool2d(MaxPool2dPlan),
}

impl Plan {
    /// Builds the tables for spatial input dims `input` and output dims `output` (all ≥ 1).
    pub fn new(config: &Config, input: &[usize], output: &[usize]) -> Plan {
        let geoms: Vec<AxisGeom> = input
            .iter()
            .zip(output)
            .enumerate()
            .map(|(a, (&i, &o))| AxisGeom {
                input: i,
                output: o,
                scale: config.size.scale(a),
                roi: config.roi_of(a),
            })
            .collect();
        let tables = |f: &dyn Fn(&AxisGeom) -> AxisTaps| geoms.iter().map(f).collect();
        let separable = |reduce, axes| Plan::Separable(SeparablePlan::new(reduce, axes));
        match config.mode {
            Mode::Nearest => Plan::Nearest(NearestPlan::new(
                geoms.iter().map(|g| nearest::indices(config, g)).collect(),
                input.to_vec(),
            )),
            Mode::Linear { .. } => separable(Reduce::Sum, tables(&|g| linear::taps(config, g))),
            Mode::Cubic => separable(Reduce::Sum, tables(&|g| cubic::taps(config, g))),
            Mode::AdaptiveAvg { .. } => {
                separable(Reduce::Sum, tables(&|g| pool::taps(g.input, g.output)))
            }
            Mode::AdaptiveMax { .. } if input.len() == 2 => Plan::MaxPool2d(MaxPool2dPlan::new(
                [input[0], input[1]],
                [output[0], output[1]],
                config.tactic,
            )),
            Mode::AdaptiveMax { .. } => {
                separable(Reduce::Max, tables(&|g| pool::taps(g.input, g.output)))
            }
        }
    }

    /// Computes outputs `outer` of the outermost spatial axis of one plane.
    pub fn run<T: Float>(
        &self,
        src: &[T],
        outer: Range<usize>,
        dst: &mut [T],
        scratch: &mut Scratch,
    ) {
        match self {
            Plan::Nearest(plan) => plan.plane(src, outer, dst),
            Plan::Separable(plan) => plan.plane(src, outer, dst, scratch),
            Plan::MaxPool2d(plan) => {
                let (widened, acc) = scratch.buffers();
                plan.plane(src, outer, dst, widened, acc)
            }
        }
    }
}
