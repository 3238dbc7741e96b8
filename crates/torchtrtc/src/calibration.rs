//! `--precision int8`: calibration inputs from a folder of `.npy` files, and the calibration
//! cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use torchtrt::{Int8Calibration, NetworkDefinition, Tensor};

use crate::BuildOptions;
use crate::npy::read_tensor;

/// The largest calibration cache read (a line per tensor a convolution reads).
const MAX_CACHE_BYTES: u64 = 64 << 20;

/// The calibration an INT8 build of `net` uses: read from `--calibration-cache` when that
/// file exists, else computed from the batches in `--calibration` (and then written to the
/// cache when one is named).
pub fn for_network(net: &NetworkDefinition, opts: &BuildOptions) -> Result<Arc<Int8Calibration>> {
    if let Some(cache) = opts.calibration_cache.as_deref().filter(|c| c.exists()) {
        let bytes = torchtrt::files::read_bounded(cache, MAX_CACHE_BYTES, "calibration cache")
            .with_context(|| format!("reading {}", cache.display()))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", cache.display()))?;
        let calibration = Int8Calibration::from_text(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", cache.display()))?;
        tracing::info!(cache = %cache.display(), tensors = calibration.ranges.len(), "calibration cache");
        return Ok(Arc::new(calibration));
    }
    let Some(dir) = &opts.calibration else {
        bail!("--precision int8 needs --calibration DIR (or an existing --calibration-cache)");
    };
    let batches = batches(dir, net)?;
    let calibration = torchtrt::calibrate_with(net, &batches, opts.calibration_method)
        .with_context(|| format!("calibrating on {}", dir.display()))?;
    if let Some(cache) = &opts.calibration_cache {
        std::fs::write(cache, calibration.to_text())
            .with_context(|| format!("writing {}", cache.display()))?;
    }
    tracing::info!(
        batches = batches.len(),
        tensors = calibration.ranges.len(),
        "calibrated"
    );
    Ok(Arc::new(calibration))
}

/// The batches in `dir`, in name order: each `.npy` file is one batch of a one-input model;
/// each sub-folder one batch holding `<input>.npy` for every input.
fn batches(dir: &Path, net: &NetworkDefinition) -> Result<Vec<Vec<(String, Tensor)>>> {
    let inputs: Vec<&str> = net.inputs().iter().map(|i| i.name.as_str()).collect();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("--calibration {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("--calibration {}", dir.display()))?;
    entries.sort();
    let mut batches = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            let batch = inputs
                .iter()
                .map(|name| {
                    let file = entry.join(format!("{name}.npy"));
                    let t = read_tensor(&file)
                        .with_context(|| format!("calibration batch {}", entry.display()))?;
                    Ok((name.to_string(), t))
                })
                .collect::<Result<_>>()?;
            batches.push(batch);
        } else if entry.extension().is_some_and(|e| e == "npy") {
            let [name] = inputs[..] else {
                bail!(
                    "--calibration {}: the model has {} inputs ({}); give each batch as a \
                     folder of <input>.npy files",
                    dir.display(),
                    inputs.len(),
                    inputs.join(", ")
                );
            };
            batches.push(vec![(name.to_string(), read_tensor(&entry)?)]);
        }
    }
    if batches.is_empty() {
        bail!(
            "--calibration {}: no .npy files or batch folders in it",
            dir.display()
        );
    }
    Ok(batches)
}
