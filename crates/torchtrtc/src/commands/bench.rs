//! `torchtrtc bench`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use torchtrt::plugin_api::DType;
use torchtrt::{Engine, Tensor};

use crate::BuildOptions;
use crate::args::{parse_input_shape, parse_pair};
use crate::npy::read_tensor;
use crate::progress::Progress;

/// Arguments of `bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// An ONNX model or an engine file.
    model: PathBuf,
    /// Input data: NAME=FILE.npy or NAME=FILE.pb (repeatable); inputs not given are filled
    /// with deterministic values at their `--input-shape` or opt shape.
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Timed iterations.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Untimed warm-up iterations.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Print a JSON object on the last line.
    #[arg(long)]
    json: bool,
    /// Time every layer and print the slowest ones, by kind and by layer.
    #[arg(long)]
    profile: bool,
    /// Time every layer and write each one's time per run, in execution order, to FILE as a
    /// JSON array of `{"name", "kind", "ms", "percent"}` (trtexec's `--exportProfile`).
    #[arg(long = "export-profile", value_name = "FILE")]
    export_profile: Option<PathBuf>,
    #[command(flatten)]
    build: BuildOptions,
}

/// Times repeated executions on bound buffers the context owns (device memory for a GPU
/// engine), so an iteration is the engine's work alone: no host copies, no allocation.
pub fn run(a: BenchArgs) -> Result<()> {
    let files: Vec<(String, Tensor)> = a
        .inputs
        .iter()
        .map(|s| {
            let (name, file) = parse_pair(s)?;
            Ok((name, read_tensor(file.as_ref())?))
        })
        .collect::<Result<_>>()?;
    let shapes: Vec<(String, Vec<usize>)> = files
        .iter()
        .map(|(n, t)| (n.clone(), t.shape().to_vec()))
        .collect();
    let stages = Progress::stages(4);
    let engine = super::load_or_compile(&a.model, &a.build, &shapes, &stages)?;
    stages.finish();
    let inputs = bench_inputs(&engine, files, &a.build.input_shapes)?;
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut ctx = engine.create_context()?;
    ctx.set_memory_limit(super::build_config(&a.build).memory_limit());
    ctx.bind_owned(&named)?;
    let bar = Progress::iterations(a.warmup + a.iterations.max(1), "warm-up");
    for _ in 0..a.warmup {
        ctx.execute_bound()?;
        bar.inc();
    }
    bar.message("timing");
    let mut times = Vec::with_capacity(a.iterations.max(1));
    for _ in 0..a.iterations.max(1) {
        let t = Instant::now();
        ctx.execute_bound()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bar.inc();
    }
    bar.finish();
    times.sort_by(f64::total_cmp);
    if a.profile || a.export_profile.is_some() {
        ctx.set_profiling(true);
        for _ in 0..a.iterations.max(1) {
            ctx.execute_bound()?;
        }
        let p = ctx.profile().unwrap_or_default();
        if a.profile {
            print_profile(p);
        }
        if let Some(path) = &a.export_profile {
            std::fs::write(path, profile_json(p))
                .with_context(|| format!("writing the profile to {}", path.display()))?;
        }
    }
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let median = pct(0.5);
    let rss = peak_rss_bytes();
    let shapes: Vec<String> = inputs
        .iter()
        .map(|(n, t)| format!("{n}{:?}", t.shape()))
        .collect();
    println!(
        "{} on {} at {}: min {:.3} ms, median {median:.3} ms, p90 {:.3} ms, p99 {:.3} ms, {:.1} inferences/s, peak RSS {:.1} MiB",
        a.model.display(),
        ctx.device(),
        shapes.join(" "),
        times[0],
        pct(0.9),
        pct(0.99),
        1e3 / median,
        rss as f64 / (1 << 20) as f64
    );
    if a.json {
        println!(
            "{{\"median_ms\": {median}, \"p90_ms\": {}, \"p99_ms\": {}, \"min_ms\": {}, \"throughput_per_s\": {}, \"peak_rss_bytes\": {rss}, \"iterations\": {}, \"device\": \"{}\"}}",
            pct(0.9),
            pct(0.99),
            times[0],
            1e3 / median,
            times.len(),
            ctx.device()
        );
    }
    Ok(())
}

/// Every engine input, by name: the file given for it, else hashed values ([`noise`]) at the
/// shape `--input-shape` gives (which must lie in the engine's profile), else at its opt
/// shape.
fn bench_inputs(
    engine: &Engine,
    mut files: Vec<(String, Tensor)>,
    shape_specs: &[String],
) -> Result<Vec<(String, Tensor)>> {
    let plan = engine.plan();
    for (name, _) in &files {
        if !plan.inputs.iter().any(|i| i.name == *name) {
            bail!("--input {name}=…: the engine has no input `{name}`");
        }
    }
    let mut asked: Vec<(String, Vec<usize>)> = Vec::new();
    for spec in shape_specs {
        let (name, dims) = parse_input_shape(spec)?;
        if !plan.inputs.iter().any(|i| i.name == name) {
            bail!("--input-shape {spec}: the engine has no input `{name}`");
        }
        let shape = dims
            .iter()
            .map(|d| usize::try_from(d.range().1).ok())
            .collect::<Option<Vec<usize>>>()
            .with_context(|| format!("--input-shape {spec}: a dimension is negative"))?;
        asked.push((name, shape));
    }
    let mut inputs = Vec::with_capacity(plan.inputs.len());
    for (k, spec) in plan.inputs.iter().enumerate() {
        if let Some(i) = files.iter().position(|(n, _)| *n == spec.name) {
            inputs.push(files.swap_remove(i));
            continue;
        }
        let dims: Vec<usize> = match asked.iter().find(|(n, _)| *n == spec.name) {
            Some((_, shape)) => shape.clone(),
            None => spec.dims.iter().map(|d| d.range().1 as usize).collect(),
        };
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|j| noise(j as u64, k as u64)).collect();
        inputs.push((spec.name.clone(), filled(spec.dtype, &dims, &v)?));
    }
    let meta: Vec<(DType, &[usize])> = inputs.iter().map(|(_, t)| (t.dtype(), t.shape())).collect();
    engine.check_inputs(&meta)?;
    Ok(inputs)
}

/// A value in [0, 1) hashed from an element's index and its input's: the same every run, in
/// no order a branch predictor learns (an ordered fill would hide the cost of data-dependent
/// branches that real inputs pay).
fn noise(element: u64, input: u64) -> f64 {
    (torchtrt::tensor::mix_bits(element ^ input << 48) % 1000) as f64 / 1000.0
}

/// Every layer that ran, in execution order, as a JSON array: name, kind, milliseconds per
/// run and share of the layers' total.
fn profile_json(p: &[torchtrt::LayerTiming]) -> String {
    let ran: Vec<&torchtrt::LayerTiming> = p.iter().filter(|t| t.calls > 0).collect();
    let total: f64 = ran.iter().map(|t| per_run(t)).sum();
    let rows: Vec<String> = ran
        .iter()
        .map(|t| {
            let ms = per_run(t);
            let percent = if total > 0.0 { 100.0 * ms / total } else { 0.0 };
            format!(
                "  {{\"name\": \"{}\", \"kind\": \"{}\", \"ms\": {ms}, \"percent\": {percent}}}",
                json_escape(&t.layer),
                json_escape(t.kind)
            )
        })
        .collect();
    format!("[\n{}\n]\n", rows.join(",\n"))
}

/// `s` as the inside of a JSON string.
fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A layer's time per run, in milliseconds.
fn per_run(t: &torchtrt::LayerTiming) -> f64 {
    t.total.as_secs_f64() * 1e3 / t.calls.max(1) as f64
}

/// Time per layer kind and the slowest layers, in ms per run.
fn print_profile(p: &[torchtrt::LayerTiming]) {
    let total: f64 = p.iter().map(per_run).sum();
    let mut kinds: Vec<(&str, f64, usize)> = Vec::new();
    for t in p.iter().filter(|t| t.calls > 0) {
        match kinds.iter_mut().find(|k| k.0 == t.kind) {
            Some(k) => {
                k.1 += per_run(t);
                k.2 += 1;
            }
            None => kinds.push((t.kind, per_run(t), 1)),
        }
    }
    kinds.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("per kind ({total:.3} ms per run in layers):");
    for (kind, ms, n) in &kinds {
        println!(
            "  {kind:<16} {ms:>9.3} ms {:>5.1}%  ({n} layers)",
            100.0 * ms / total
        );
    }
    let mut layers: Vec<&torchtrt::LayerTiming> = p.iter().filter(|t| t.calls > 0).collect();
    layers.sort_by(|a, b| per_run(b).total_cmp(&per_run(a)));
    println!("slowest layers:");
    for t in layers.iter().take(12) {
        println!("  {:<40} {:<14} {:>9.3} ms", t.layer, t.kind, per_run(t));
    }
}

fn filled(dtype: DType, dims: &[usize], v: &[f64]) -> Result<Tensor> {
    use torchtrt::plugin_api::{bf16, f16};
    Ok(match dtype {
        DType::F32 => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect())?,
        DType::F64 => Tensor::from_vec(dims, v.to_vec())?,
        DType::F16 => Tensor::from_vec(dims, v.iter().map(|&x| f16::from_f64(x)).collect())?,
        DType::BF16 => Tensor::from_vec(dims, v.iter().map(|&x| bf16::from_f64(x)).collect())?,
        DType::I64 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as i64).collect())?,
        DType::I32 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as i32).collect())?,
        DType::I16 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as i16).collect())?,
        DType::I8 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as i8).collect())?,
        DType::U8 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as u8).collect())?,
        DType::U16 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as u16).collect())?,
        DType::U32 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as u32).collect())?,
        DType::U64 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as u64).collect())?,
        DType::Bool => Tensor::from_bytes(
            DType::Bool,
            dims,
            &v.iter().map(|&x| u8::from(x >= 0.5)).collect::<Vec<u8>>(),
        )?,
    })
}

/// Peak resident set size of this process (`VmHWM`), 0 where unknown.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{json_escape, profile_json};

    #[test]
    fn profiles_export_as_json_with_names_escaped() {
        assert_eq!(json_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\u000ad");
        let timing = |layer: &str, calls, ms| torchtrt::LayerTiming {
            layer: layer.into(),
            kind: "Convolution",
            calls,
            total: Duration::from_secs_f64(ms / 1e3),
        };
        let p = [
            timing("a\"1", 4, 6.0),
            timing("never", 0, 0.0),
            timing("b", 2, 1.0),
        ];
        let want = [
            "[",
            r#"  {"name": "a\"1", "kind": "Convolution", "ms": 1.5, "percent": 75},"#,
            r#"  {"name": "b", "kind": "Convolution", "ms": 0.5, "percent": 25}"#,
            "]",
            "",
        ];
        assert_eq!(profile_json(&p), want.join("\n"));
    }
}
