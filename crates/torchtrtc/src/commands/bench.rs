//! `torchtrtc bench`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use torchtrt::cuda::DeviceBuffer;
use torchtrt::plugin_api::DType;
use torchtrt::{CudaExecutionContext, DeviceIo, Engine, Tensor};

use crate::BuildOptions;
use crate::progress::Progress;

/// Arguments of `bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// An ONNX model or an engine file.
    model: PathBuf,
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
    #[command(flatten)]
    build: BuildOptions,
}

/// Times repeated executions on deterministic inputs at the inputs' opt shapes.
pub fn run(a: BenchArgs) -> Result<()> {
    let stages = Progress::stages(4);
    let engine = super::load_or_compile(&a.model, &a.build, &[], &stages)?;
    stages.finish();
    let inputs: Vec<Tensor> = engine
        .plan()
        .inputs
        .iter()
        .map(|i| {
            let dims: Vec<usize> = i.dims.iter().map(|d| d.range().1 as usize).collect();
            let n: usize = dims.iter().product();
            let v: Vec<f64> = (0..n)
                .map(|k| ((k * 7919) % 1000) as f64 / 1000.0)
                .collect();
            filled(i.dtype, &dims, &v)
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let mut runner = Runner::new(&engine, &refs)?;
    let bar = Progress::iterations(a.warmup + a.iterations.max(1), "warm-up");
    for _ in 0..a.warmup {
        runner.step(&refs)?;
        bar.inc();
    }
    bar.message("timing");
    let mut times = Vec::with_capacity(a.iterations);
    for _ in 0..a.iterations.max(1) {
        let t = Instant::now();
        runner.step(&refs)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bar.inc();
    }
    bar.finish();
    times.sort_by(f64::total_cmp);
    if a.profile {
        runner.set_profiling()?;
        for _ in 0..a.iterations.max(1) {
            runner.step(&refs)?;
        }
        if let Some(p) = runner.profile() {
            print_profile(p);
        }
    }
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let median = pct(0.5);
    let rss = peak_rss_bytes();
    let shapes: Vec<String> = engine
        .plan()
        .inputs
        .iter()
        .zip(&inputs)
        .map(|(i, t)| format!("{}{:?}", i.name, t.shape()))
        .collect();
    println!(
        "{} at {}: min {:.3} ms, median {median:.3} ms, p90 {:.3} ms, p99 {:.3} ms, {:.1} inferences/s, peak RSS {:.1} MiB",
        a.model.display(),
        shapes.join(" "),
        times[0],
        pct(0.9),
        pct(0.99),
        1e3 / median,
        rss as f64 / (1 << 20) as f64
    );
    if a.json {
        println!(
            "{{\"median_ms\": {median}, \"p90_ms\": {}, \"p99_ms\": {}, \"min_ms\": {}, \"throughput_per_s\": {}, \"peak_rss_bytes\": {rss}, \"iterations\": {}}}",
            pct(0.9),
            pct(0.99),
            times[0],
            1e3 / median,
            times.len()
        );
    }
    Ok(())
}

/// What one timed iteration runs: the host runtime on host tensors, or for a CUDA engine the
/// device-resident context on inputs and outputs kept in device memory, waiting for its
/// stream each iteration.
enum Runner {
    Host(torchtrt::ExecutionContext),
    Cuda {
        ctx: Box<CudaExecutionContext>,
        inputs: Vec<DeviceIo>,
        outputs: Vec<DeviceIo>,
        _buffers: Vec<DeviceBuffer>,
    },
}

impl Runner {
    fn new(engine: &Engine, inputs: &[&Tensor]) -> Result<Runner> {
        if !matches!(engine.target(), torchtrt::Target::Cuda { .. }) {
            return Ok(Runner::Host(engine.create_context()));
        }
        let mut ctx = torchtrt::cuda_context(engine)?;
        let described: Vec<(DType, &[usize])> =
            inputs.iter().map(|t| (t.dtype(), t.shape())).collect();
        let shapes = ctx.output_shapes(&described)?;
        let device = ctx.stream().device().clone();
        let mut buffers = Vec::new();
        let mut on_device = |bytes: usize| -> Result<u64> {
            let b = device.allocator().alloc(bytes)?;
            let ptr = b.ptr();
            buffers.push(b);
            Ok(ptr)
        };
        let mut device_inputs = Vec::with_capacity(inputs.len());
        for t in inputs {
            let ptr = on_device(t.bytes().len())?;
            device_inputs.push(DeviceIo {
                ptr,
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
            });
        }
        let mut outputs = Vec::with_capacity(shapes.len());
        for (out, shape) in engine.outputs().iter().zip(shapes) {
            let ptr = on_device(shape.iter().product::<usize>() * out.dtype.size())?;
            outputs.push(DeviceIo {
                ptr,
                dtype: out.dtype,
                shape,
            });
        }
        for (t, b) in inputs.iter().zip(&buffers) {
            ctx.stream().upload(t.bytes(), b)?;
        }
        Ok(Runner::Cuda {
            ctx: Box::new(ctx),
            inputs: device_inputs,
            outputs,
            _buffers: buffers,
        })
    }

    fn step(&mut self, host_inputs: &[&Tensor]) -> Result<()> {
        match self {
            Runner::Host(ctx) => {
                ctx.execute(host_inputs)?;
            }
            Runner::Cuda {
                ctx,
                inputs,
                outputs,
                ..
            } => {
                let stream = ctx.stream().raw();
                // SAFETY: the buffers are this runner's, sized for these shapes, and the
                // stream is waited for before the next step.
                unsafe { ctx.enqueue(inputs, outputs, stream) }?;
                ctx.stream().synchronize()?;
            }
        }
        Ok(())
    }

    fn set_profiling(&mut self) -> Result<()> {
        match self {
            Runner::Host(ctx) => ctx.set_profiling(true),
            Runner::Cuda { ctx, .. } => ctx.set_profiling(true),
        }
        Ok(())
    }

    fn profile(&self) -> Option<&[torchtrt::LayerTiming]> {
        match self {
            Runner::Host(ctx) => ctx.profile(),
            Runner::Cuda { ctx, .. } => ctx.profile(),
        }
    }
}

/// Time per layer kind and the slowest layers, in ms per run.
fn print_profile(p: &[torchtrt::LayerTiming]) {
    let per_run = |t: &torchtrt::LayerTiming| t.total.as_secs_f64() * 1e3 / t.calls.max(1) as f64;
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
    Ok(match dtype {
        DType::F32 => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect())?,
        DType::I64 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as i64).collect())?,
        DType::I32 => Tensor::from_vec(dims, v.iter().map(|&x| (x * 10.0) as i32).collect())?,
        DType::F16 => Tensor::from_vec(
            dims,
            v.iter()
                .map(|&x| torchtrt::plugin_api::f16::from_f64(x))
                .collect(),
        )?,
        other => anyhow::bail!("bench cannot make {other} inputs yet"),
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
