//! Chooses among a plugin's tactics: each runs on the build machine's device at the
//! profile's optimum shapes (one warm-up, then the median of [`RUNS`] runs), the fastest is
//! stored in the layer, and the build's timing cache remembers it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use torchtrt_plugin_api::{
    DType, DeviceKind, DeviceTensor, Plugin, PluginResult, Tactic, TensorDesc,
};

use super::timing_cache::CachedTactic;
use super::{BuildConfig, Work, convert_f32};
use crate::backend::{Backend, DeviceContext, Kernel, PluginKernel};
use crate::error::{Error, Result};
use crate::layers::{PluginLayer, TypeShape};
use crate::network::{NetworkInput, TensorId};
use crate::registry::guard_plugin;
use crate::tensor::{Tensor, mix_bits};

/// Timed runs per tactic.
const RUNS: usize = 5;

/// What timing needs beyond the layer: the backends and the build's options.
pub(super) struct Timing<'a> {
    pub backends: &'a [Arc<dyn Backend>],
    pub config: &'a BuildConfig,
}

/// The optimum value of every dynamic dimension of `inputs`.
pub(super) fn optimum(inputs: &[NetworkInput]) -> HashMap<String, i64> {
    inputs
        .iter()
        .flat_map(|i| &i.dims)
        .filter_map(|d| match d {
            crate::network::Dim::Dynamic { name, opt, .. } => Some((name.clone(), *opt)),
            crate::network::Dim::Fixed(_) => None,
        })
        .collect()
}

impl Work {
    /// The concrete shape of `ty` at the optimum, if every dimension is known there.
    pub(super) fn at_opt(&self, ty: &TypeShape) -> Option<Vec<usize>> {
        ty.shape
            .iter()
            .map(|d| {
                d.eval(&|s| self.opt.get(s).copied())
                    .ok()
                    .and_then(|v| usize::try_from(v).ok())
            })
            .collect()
    }
}

/// Times the tactics `layer`'s configured plugin offers on `device` and keeps the fastest
/// (from the timing cache when it holds this configuration). Nothing happens when the
/// plugin offers fewer than two, or when its shapes at the optimum depend on values only
/// known at run time.
pub(super) fn choose(
    work: &Work,
    name: &str,
    layer: &mut PluginLayer,
    inputs: &[TensorId],
    outputs: &[TypeShape],
    device: DeviceKind,
    timing: &Timing<'_>,
) -> Result<()> {
    let context = || format!("layer `{name}` (plugin {})", layer.key);
    let shapes = |tys: Vec<&TypeShape>| -> Option<Vec<(DType, Vec<usize>)>> {
        tys.into_iter()
            .map(|t| work.at_opt(t).map(|s| (t.dtype, s)))
            .collect()
    };
    let (Some(ins), Some(outs)) = (
        shapes(inputs.iter().map(|&t| work.ty(t)).collect()),
        shapes(outputs.iter().collect()),
    ) else {
        return Ok(());
    };
    let descs = |v: &[(DType, Vec<usize>)]| -> Vec<TensorDesc> {
        v.iter()
            .map(|(d, s)| TensorDesc::new(*d, s.iter().map(|&x| x as i64).collect::<Vec<_>>()))
            .collect()
    };
    let (in_descs, out_descs) = (descs(&ins), descs(&outs));
    let plugin = layer.plugin().map_err(Error::Engine)?.clone();
    let tactics =
        guard_plugin(|| Ok(plugin.tactics(&in_descs, &out_descs, device))).map_err(|source| {
            Error::Plugin {
                context: context(),
                source,
            }
        })?;
    Tactic::check(&tactics).map_err(|m| Error::Layer {
        layer: name.to_string(),
        kind: "Plugin",
        message: format!("plugin {}: {m}", layer.key),
    })?;
    if tactics.len() < 2 {
        return Ok(());
    }
    let Some(backend) = timing.backends.iter().find(|b| b.device() == device) else {
        return Ok(());
    };
    let key = cache_key(layer, &in_descs, &out_descs, backend.as_ref());
    let cached = timing
        .config
        .timing_cache
        .as_ref()
        .and_then(|c| c.lock().ok()?.lookup(&key))
        .and_then(|c| tactics.iter().find(|t| t.id == c.id).cloned());
    let chosen = match cached {
        Some(t) => t,
        None => {
            let bytes: usize = ins
                .iter()
                .chain(&outs)
                .map(|(d, s)| d.size() * s.iter().product::<usize>())
                .sum();
            if bytes as u64 > timing.config.memory_limit() {
                return Ok(());
            }
            let data = timing_inputs(work, inputs, &ins)?;
            let mut best: Option<(f64, &Tactic)> = None;
            for t in &tactics {
                let micros = match time_tactic(backend.as_ref(), &plugin, t.id, &data, &outs) {
                    Ok(m) => m,
                    Err(error) => {
                        tracing::warn!(layer = name, tactic = %t.name, %error, "tactic failed while timed; passed over");
                        continue;
                    }
                };
                if best.is_none_or(|(b, _)| micros < b) {
                    best = Some((micros, t));
                }
            }
            let Some((micros, t)) = best else {
                return Ok(());
            };
            if let Some(cache) = &timing.config.timing_cache
                && let Ok(mut cache) = cache.lock()
            {
                cache.insert(&key, CachedTactic { id: t.id, micros });
            }
            t.clone()
        }
    };
    let configured = with_tactic(&plugin, chosen.id).map_err(|source| Error::Plugin {
        context: context(),
        source,
    })?;
    layer.tactic = Some(chosen);
    layer.set_plugin(configured);
    Ok(())
}

/// A copy of `plugin` set to `tactic`.
fn with_tactic(plugin: &Arc<dyn Plugin>, tactic: u32) -> PluginResult<Arc<dyn Plugin>> {
    guard_plugin(|| {
        let mut p = plugin.clone_plugin();
        p.set_tactic(tactic)?;
        Ok(Arc::from(p))
    })
}

/// What identifies a timing: the plugin and a hash of its fields, the concrete dtypes and
/// shapes, the device.
fn cache_key(
    layer: &PluginLayer,
    ins: &[TensorDesc],
    outs: &[TensorDesc],
    backend: &dyn Backend,
) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in layer.fields.iter() {
        for b in f.name.bytes().chain(f.value.to_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let list = |v: &[TensorDesc]| -> String {
        v.iter()
            .map(|d| format!("{}{:?}", d.dtype, d.shape))
            .collect::<Vec<_>>()
            .join(",")
    };
    let device = match backend.compute_capability() {
        Some((major, minor)) => format!("{} sm_{major}{minor}", backend.name()),
        None => backend.name(),
    };
    format!(
        "{} fields={h:016x} in={} out={} on={device}",
        layer.key,
        list(ins),
        list(outs)
    )
}

/// The inputs a timing run reads: the layer's constant inputs as they are, others filled
/// with values in [-1, 1) for floats (hashed from the index) and zeros for integers (valid
/// indices and counts).
fn timing_inputs(
    work: &Work,
    inputs: &[TensorId],
    shapes: &[(DType, Vec<usize>)],
) -> Result<Vec<Tensor>> {
    inputs
        .iter()
        .zip(shapes)
        .map(|(&t, (dtype, shape))| {
            if let Some(v) = &work.tensors[t.index()].value {
                return Ok(v.as_ref().clone());
            }
            if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64) {
                return Tensor::try_zeros(*dtype, shape);
            }
            let n: usize = shape.iter().product();
            let values: Vec<f32> = (0..n as u64)
                .map(|i| (mix_bits(i) >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
                .collect();
            let t = Tensor::from_vec(shape, values)?;
            match dtype {
                DType::F64 => Tensor::from_vec(shape, t.to_f64_vec()),
                _ => convert_f32(&t, *dtype),
            }
        })
        .collect()
}

/// The median time in microseconds of `RUNS` runs of `plugin` set to `tactic`, after one
/// warm-up run; an error when the tactic cannot be set or fails to run.
fn time_tactic(
    backend: &dyn Backend,
    plugin: &Arc<dyn Plugin>,
    tactic: u32,
    inputs: &[Tensor],
    outputs: &[(DType, Vec<usize>)],
) -> std::result::Result<f64, String> {
    let configured = with_tactic(plugin, tactic).map_err(|e| e.to_string())?;
    let mut times = Vec::with_capacity(RUNS);
    match backend.plugin_kernel(&configured) {
        Some(kernel) => {
            let kernel = kernel?;
            let mut device = backend
                .create_device_context()?
                .ok_or("the backend has no device context")?;
            let shape_inputs = configured.shape_inputs();
            let values: Vec<Option<&Tensor>> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| shape_inputs.contains(&i).then_some(t))
                .collect();
            times = time_on_device(kernel.as_ref(), device.as_mut(), inputs, &values, outputs)?;
        }
        None => {
            let kernel = PluginKernel::of(configured, backend.host_threads());
            let refs: Vec<&Tensor> = inputs.iter().collect();
            let mut outs: Vec<Tensor> = outputs
                .iter()
                .map(|(d, s)| Tensor::try_zeros(*d, s).map_err(|e| e.to_string()))
                .collect::<std::result::Result<_, _>>()?;
            for run in 0..=RUNS {
                let start = Instant::now();
                kernel.execute(&refs, &mut outs)?;
                if run > 0 {
                    times.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    times.sort_by(f64::total_cmp);
    times
        .get(times.len() / 2)
        .copied()
        .ok_or_else(|| "no run".to_string())
}

/// [`time_tactic`]'s runs on a device: inputs uploaded once, each run queued and waited for;
/// `values` holds the host copies of the shape inputs (others `None`).
fn time_on_device(
    kernel: &dyn Kernel,
    device: &mut dyn DeviceContext,
    inputs: &[Tensor],
    values: &[Option<&Tensor>],
    outputs: &[(DType, Vec<usize>)],
) -> std::result::Result<Vec<f64>, String> {
    device.begin_run()?;
    let mut held = Vec::new();
    let result = runs_on_device(kernel, device, inputs, values, outputs, &mut held);
    for m in held {
        device.release(m);
    }
    device.end_run();
    result
}

fn runs_on_device(
    kernel: &dyn Kernel,
    device: &mut dyn DeviceContext,
    inputs: &[Tensor],
    values: &[Option<&Tensor>],
    outputs: &[(DType, Vec<usize>)],
    held: &mut Vec<crate::backend::DeviceMemory>,
) -> std::result::Result<Vec<f64>, String> {
    let mut alloc = |device: &mut dyn DeviceContext, desc: TensorDesc| {
        let memory = device.alloc(desc.byte_len().unwrap_or(0).max(1))?;
        held.push(memory);
        Ok::<_, String>(DeviceTensor {
            desc,
            ptr: memory.ptr,
        })
    };
    let mut dev_in = Vec::with_capacity(inputs.len());
    for t in inputs {
        let d = alloc(device, t.desc())?;
        // SAFETY: `d.ptr` was just allocated with room for the tensor's bytes.
        unsafe { device.upload(t.bytes(), d.ptr)? };
        dev_in.push(d);
    }
    let mut dev_out = Vec::with_capacity(outputs.len());
    for (d, s) in outputs {
        let dims: Vec<i64> = s.iter().map(|&x| x as i64).collect();
        dev_out.push(alloc(device, TensorDesc::new(*d, dims))?);
    }
    let mut times = Vec::with_capacity(RUNS);
    for run in 0..=RUNS {
        let start = Instant::now();
        kernel.enqueue_with_values(&dev_in, values, &dev_out, device)?;
        device.synchronize()?;
        if run > 0 {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(times)
}
