//! INT8 calibration: the network runs in f32 on the CPU over a few inputs, and the range of
//! every tensor a convolution or MatMul reads (its first input) is recorded, either whole
//! (TensorRT's `IInt8MinMaxCalibrator`) or clipped at a percentile of the magnitudes
//! ([`Calibrator::Percentile`], as pytorch-quantization's histogram calibrator does), so a
//! few outliers do not coarsen the scale of every other value.
//! [`BuildConfig::int8`] takes the result; a build then quantizes those convolutions'
//! inputs ([`TensorRange::quantization`]).

use std::collections::HashSet;

use torchtrt_core::layers::LayerKind;
use torchtrt_core::{Int8Calibration, TensorRange};

use crate::{BuildConfig, Error, NetworkDefinition, Result, Tensor, TensorId};

/// Prefix of the outputs calibration adds to see inside the network.
const PROBE: &str = "__torchtrt_calibrate";

/// Bins of a calibration histogram (TensorRT's and pytorch-quantization's 2048).
const BINS: usize = 2048;

/// How a tensor's range is taken from the values it took during calibration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Calibrator {
    /// The least and largest value.
    MinMax,
    /// Clipped at this percentile (in (0, 100]) of the magnitudes: `[−t, t]` for tensors
    /// that took negative values, `[0, t]` otherwise, within the least and largest value.
    /// Needs a second pass over the batches, for the histogram.
    Percentile(f64),
}

impl Calibrator {
    /// This calibrator, or why it cannot calibrate (a percentile outside (0, 100]).
    pub fn validated(self) -> std::result::Result<Calibrator, String> {
        match self {
            Calibrator::Percentile(p) if !(p > 0.0 && p <= 100.0) => {
                Err(format!("the percentile {p} is not in (0, 100]"))
            }
            _ => Ok(self),
        }
    }
}

/// [`calibrate_with`] by [`Calibrator::MinMax`].
pub fn calibrate(
    network: &NetworkDefinition,
    batches: &[Vec<(String, Tensor)>],
) -> Result<Int8Calibration> {
    calibrate_with(network, batches, Calibrator::MinMax)
}

/// Runs `network` (f32, CPU) on each batch of named inputs and returns the ranges of the
/// tensors its convolutions and MatMuls read, by `calibrator` (tensors that took no finite
/// value are left out). Every batch must give every input.
pub fn calibrate_with(
    network: &NetworkDefinition,
    batches: &[Vec<(String, Tensor)>],
    calibrator: Calibrator,
) -> Result<Int8Calibration> {
    if batches.is_empty() {
        return Err(Error::InvalidArgument(
            "INT8 calibration needs at least one batch of inputs".into(),
        ));
    }
    calibrator
        .validated()
        .map_err(|e| Error::InvalidArgument(format!("INT8 calibration: {e}")))?;
    let mut seen = HashSet::new();
    let probes: Vec<TensorId> = network
        .layers()
        .iter()
        .filter(|l| matches!(l.kind, LayerKind::Convolution(_) | LayerKind::MatMul(_)))
        .map(|l| l.inputs[0])
        .filter(|t| seen.insert(*t))
        .collect();
    let mut probed = network.clone();
    for (i, &t) in probes.iter().enumerate() {
        probed.mark_output(t, &format!("{PROBE}{i}"))?;
    }
    let engine = crate::compile_for(&probed, &BuildConfig::default(), "cpu")?;
    let mut ctx = engine.create_context()?;
    let mut ranges: Vec<Option<TensorRange>> = vec![None; probes.len()];
    each_probe(&mut ctx, batches, |i, values| {
        for &v in values {
            let r = ranges[i].get_or_insert(TensorRange { min: v, max: v });
            r.min = r.min.min(v);
            r.max = r.max.max(v);
        }
    })?;
    if let Calibrator::Percentile(p) = calibrator {
        let mut histograms = vec![[0u64; BINS]; probes.len()];
        let top: Vec<f32> = ranges
            .iter()
            .map(|r| r.map_or(0.0, |r| r.min.abs().max(r.max.abs())))
            .collect();
        each_probe(&mut ctx, batches, |i, values| {
            let per_bin = BINS as f32 / top[i];
            for &v in values {
                histograms[i][((v.abs() * per_bin) as usize).min(BINS - 1)] += 1;
            }
        })?;
        for ((r, h), &top) in ranges.iter_mut().zip(&histograms).zip(&top) {
            if let Some(r) = r.as_mut().filter(|_| top > 0.0) {
                let t = percentile(h, p) * top;
                (r.min, r.max) = (r.min.max(-t), r.max.min(t));
            }
        }
    }
    let ranges = probes
        .iter()
        .zip(ranges)
        .filter_map(|(&t, r)| Some((network.tensor_name(t).to_string(), r?)))
        .collect();
    Ok(Int8Calibration { ranges })
}

/// Runs every batch and hands each probe's finite values to `visit` with the probe's index.
fn each_probe(
    ctx: &mut crate::ExecutionContext,
    batches: &[Vec<(String, Tensor)>],
    mut visit: impl FnMut(usize, &[f32]),
) -> Result<()> {
    for (b, batch) in batches.iter().enumerate() {
        let feeds: Vec<(&str, &Tensor)> = batch.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let outputs = ctx
            .execute_named(&feeds)
            .map_err(|e| Error::InvalidArgument(format!("calibration batch {b}: {e}")))?;
        for (name, value) in outputs {
            let Some(i) = name
                .strip_prefix(PROBE)
                .and_then(|i| i.parse::<usize>().ok())
            else {
                continue;
            };
            if !value.dtype().is_float() {
                continue;
            }
            let finite: Vec<f32> = value
                .to_f64_vec()
                .into_iter()
                .filter(|v| v.is_finite())
                .map(|v| v as f32)
                .collect();
            visit(i, &finite);
        }
    }
    Ok(())
}

/// The upper edge, as a fraction of the histogram's range, of the first bin at which the
/// count reaches `p` percent of the total.
fn percentile(histogram: &[u64; BINS], p: f64) -> f32 {
    let total: u64 = histogram.iter().sum();
    let want = (total as f64 * p / 100.0).ceil() as u64;
    let mut seen = 0;
    for (bin, &count) in histogram.iter().enumerate() {
        seen += count;
        if seen >= want {
            return (bin + 1) as f32 / BINS as f32;
        }
    }
    1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_the_edge_of_the_bin_reaching_it() {
        let mut h = [0u64; BINS];
        h[9] = 990;
        h[BINS - 1] = 10;
        assert_eq!(percentile(&h, 99.0), 10.0 / BINS as f32);
        assert_eq!(percentile(&h, 99.5), 1.0);
        assert_eq!(percentile(&h, 100.0), 1.0);
        h[BINS - 1] = 0;
        assert_eq!(percentile(&h, 100.0), 10.0 / BINS as f32);
    }
}
