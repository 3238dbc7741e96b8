//! INT8 calibration (TensorRT's `IInt8MinMaxCalibrator`): the network runs in f32 on the
//! CPU over a few inputs, and the range of every tensor a convolution or MatMul reads (its
//! first input) is recorded.
//! [`BuildConfig::int8`] takes the result; a build then quantizes those convolutions'
//! inputs ([`TensorRange::quantization`]).

use std::collections::HashSet;

use torchtrt_core::layers::LayerKind;
use torchtrt_core::{Int8Calibration, TensorRange};

use crate::{BuildConfig, Error, NetworkDefinition, Result, Tensor, TensorId};

/// Prefix of the outputs calibration adds to see inside the network.
const PROBE: &str = "__torchtrt_calibrate";

/// Runs `network` (f32, CPU) on each batch of named inputs and returns the ranges of the
/// tensors its convolutions and MatMuls read (tensors that took no finite value are left
/// out). Every batch must give every input.
pub fn calibrate(
    network: &NetworkDefinition,
    batches: &[Vec<(String, Tensor)>],
) -> Result<Int8Calibration> {
    if batches.is_empty() {
        return Err(Error::InvalidArgument(
            "INT8 calibration needs at least one batch of inputs".into(),
        ));
    }
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
            for v in value.to_f64_vec().into_iter().filter(|v| v.is_finite()) {
                let v = v as f32;
                let r = ranges[i].get_or_insert(TensorRange { min: v, max: v });
                r.min = r.min.min(v);
                r.max = r.max.max(v);
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
