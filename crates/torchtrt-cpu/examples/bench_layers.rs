//! Times single core layers (reductions, normalisations, attention, pooling) on the CPU backend with
//! preallocated outputs, for the one-node comparison with onnxruntime in
//! `bench/cpu_plugins_vs_onnxruntime.py`.
//!
//! ```text
//! cargo run --release -p torchtrt-cpu --example bench_layers -- [--json] [--iters N]
//!     [--warmup N] [--threads N] [--filter SUBSTRING] [--case NAME]
//! ```
//!
//! Each case reports the median and the fastest of `--iters` timed runs after `--warmup`
//! runs, on a backend with its own pool of `--threads` threads; `copy_ms` is one plain
//! copy of `(input bytes + output bytes) / 2`, as in `bench_plugins`.

use std::process::ExitCode;
use std::time::Instant;

use torchtrt_core::layers::{
    Attention, Normalization, PoolKind, Pooling, Reduce, ReduceOp, Softmax,
};
use torchtrt_core::plugin_api::{const_shape, shape_values};
use torchtrt_core::tensor::{mix_bits, shape_i64};
use torchtrt_core::{Backend, InferInput, LayerKind, Tensor};
use torchtrt_cpu::CpuBackend;

const BIG: [usize; 4] = [8, 64, 64, 64];

/// A named layer and the shapes of its inputs (all f32).
struct Case {
    name: &'static str,
    layer: LayerKind,
    shapes: Vec<Vec<usize>>,
    /// The input values; [`filled_inputs`] when `None`.
    values: Option<Values>,
}

/// Makes a case's inputs from their shapes.
type Values = fn(&[Vec<usize>]) -> Result<Vec<Tensor>, String>;

fn reduce(name: &'static str, op: ReduceOp, axes: &[i64]) -> Case {
    let layer = Reduce {
        op,
        axes: axes.to_vec(),
        keep_dims: true,
    };
    Case {
        name,
        layer: layer.into(),
        shapes: vec![BIG.to_vec()],
        values: None,
    }
}

fn softmax(name: &'static str, axis: i64, log: bool) -> Case {
    Case {
        name,
        layer: Softmax { axis, log }.into(),
        shapes: vec![BIG.to_vec()],
        values: None,
    }
}

fn layer_norm(name: &'static str, axis: usize) -> Case {
    let params = BIG[axis..].to_vec();
    let layer = Normalization {
        axes: (axis as i64..BIG.len() as i64).collect(),
        epsilon: 1e-5,
    };
    Case {
        name,
        layer: layer.into(),
        shapes: vec![BIG.to_vec(), params.clone(), params],
        values: None,
    }
}

/// Self-attention of one BERT-base layer: 12 heads of 64, `seq` tokens, an additive
/// padding mask `[batch, 1, seq, seq]` masking the last eighth of the keys for every query
/// (the same model `bench/cpu_plugins_vs_onnxruntime.py` gives onnxruntime).
fn attention(name: &'static str, batch: usize, seq: usize) -> Case {
    let layer = Attention {
        mask: true,
        ..Attention::default()
    };
    let qkv = vec![batch, 12, seq, 64];
    Case {
        name,
        layer: layer.into(),
        shapes: vec![qkv.clone(), qkv.clone(), qkv, vec![batch, 1, seq, seq]],
        values: Some(padded_attention),
    }
}

/// Random queries, keys and values, and a mask open to all but the last eighth of the keys.
fn padded_attention(shapes: &[Vec<usize>]) -> Result<Vec<Tensor>, String> {
    let mut inputs = filled_inputs(&shapes[..3])?;
    let mask = &shapes[3];
    let seq = mask[mask.len() - 1];
    let n: usize = mask.iter().product();
    let open = seq - seq / 8;
    let values = (0..n)
        .map(|i| {
            if i % seq < open {
                0.0
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect();
    inputs.push(Tensor::from_vec(mask, values).map_err(|e| e.to_string())?);
    Ok(inputs)
}

/// Max pooling of `[8, 64, h, w]` with a 2-D window and stride, no padding.
fn max_pool(
    name: &'static str,
    (h, w): (usize, usize),
    kernel: [i64; 2],
    strides: [i64; 2],
) -> Case {
    let layer = Pooling {
        strides: strides.to_vec(),
        ..Pooling::new(PoolKind::Max, kernel.to_vec())
    };
    Case {
        name,
        layer: layer.into(),
        shapes: vec![vec![8, 64, h, w]],
        values: None,
    }
}

fn cases() -> Vec<Case> {
    vec![
        reduce("core_global_max_pool", ReduceOp::Max, &[2, 3]),
        reduce("core_global_average_pool", ReduceOp::Mean, &[2, 3]),
        reduce("reduce_mean_last_axis", ReduceOp::Mean, &[-1]),
        reduce("reduce_mean_axis1", ReduceOp::Mean, &[1]),
        reduce("reduce_max_last_axis", ReduceOp::Max, &[-1]),
        reduce("reduce_max_axis1", ReduceOp::Max, &[1]),
        reduce("reduce_sum_all", ReduceOp::Sum, &[]),
        softmax("softmax_last_axis", -1, false),
        softmax("softmax_axis1", 1, false),
        softmax("log_softmax_last_axis", -1, true),
        layer_norm("layer_norm_last_axis", 3),
        layer_norm("layer_norm_axis1", 1),
        attention("attention_bert_s128", 1, 128),
        attention("attention_bert_s512", 1, 512),
        max_pool("max_pool_64_k2_s2", (64, 64), [2, 2], [2, 2]),
        max_pool("max_pool_30x45_k6x8_s4x6", (30, 45), [6, 8], [4, 6]),
    ]
}

/// Command-line options.
struct Options {
    json: bool,
    iters: usize,
    warmup: usize,
    threads: usize,
    filter: Option<String>,
    case: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        json: false,
        iters: 30,
        warmup: 5,
        threads: 2,
        filter: None,
        case: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let count = |s: String| s.parse().map_err(|_| format!("`{s}` is not a count"));
        match a.as_str() {
            "--json" => o.json = true,
            "--iters" => o.iters = count(value("--iters")?)?,
            "--warmup" => o.warmup = count(value("--warmup")?)?,
            "--threads" => o.threads = count(value("--threads")?)?,
            "--filter" => o.filter = Some(value("--filter")?),
            "--case" => o.case = Some(value("--case")?),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    o.iters = o.iters.max(1);
    Ok(o)
}

/// Median and fastest run, in milliseconds.
fn time_ms(o: &Options, mut f: impl FnMut() -> Result<(), String>) -> Result<(f64, f64), String> {
    for _ in 0..o.warmup {
        f()?;
    }
    let mut times = Vec::with_capacity(o.iters);
    for _ in 0..o.iters {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[0]))
}

/// Values in [-3, 3) in no order a branch predictor learns (a hash of the index), the
/// same every run.
fn filled(shape: &[usize], seed: usize) -> Result<Tensor, String> {
    let n: usize = shape.iter().product();
    let values = (0..n)
        .map(|i| (mix_bits(i as u64 ^ (seed as u64) << 40) % 6000) as f32 / 1000.0 - 3.0)
        .collect();
    Tensor::from_vec(shape, values).map_err(|e| e.to_string())
}

/// Inputs of `shapes`, input `k` [`filled`] with seed `k`.
fn filled_inputs(shapes: &[Vec<usize>]) -> Result<Vec<Tensor>, String> {
    shapes
        .iter()
        .enumerate()
        .map(|(k, s)| filled(s, k))
        .collect()
}

/// Median and fastest time of the layer, its bytes moved, and the copy's median.
fn run_case(case: &Case, o: &Options, backend: &CpuBackend) -> Result<[f64; 3], String> {
    let inputs = case.values.unwrap_or(filled_inputs)(&case.shapes)?;
    let shapes: Vec<_> = inputs
        .iter()
        .map(|t| const_shape(&shape_i64(t.shape())))
        .collect();
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(t, shape)| InferInput {
            dtype: t.dtype(),
            shape,
            value: None,
        })
        .collect();
    let types = case.layer.op().infer(&infer)?;
    let kernel = backend.prepare(&case.layer, &infer)?;
    let mut outputs: Vec<Tensor> = types
        .iter()
        .map(|ts| {
            let dims = shape_values(&ts.shape).ok_or("symbolic output")?;
            let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            Ok(Tensor::zeros(ts.dtype, &dims))
        })
        .collect::<Result<_, String>>()?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let (median, min) = time_ms(o, || kernel.execute(&refs, &mut outputs))?;
    let bytes = inputs[0].bytes().len() + outputs[0].bytes().len();
    let src = vec![1f32; bytes / 8];
    let mut dst = vec![0f32; src.len()];
    let (copy, _) = time_ms(o, || {
        dst.copy_from_slice(std::hint::black_box(&src));
        Ok(())
    })?;
    Ok([median, min, copy])
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench_layers: {e}");
            return ExitCode::from(2);
        }
    };
    let backend = match CpuBackend::with_threads(o.threads.max(1)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("bench_layers: cannot start {} threads: {e}", o.threads);
            return ExitCode::FAILURE;
        }
    };
    if !o.json {
        println!(
            "{:<28} {:>10} {:>10} {:>10}",
            "case", "ours ms", "ours min", "copy ms"
        );
    }
    for case in cases() {
        if o.filter.as_deref().is_some_and(|f| !case.name.contains(f))
            || o.case.as_deref().is_some_and(|c| c != case.name)
        {
            continue;
        }
        match run_case(&case, &o, &backend) {
            Ok([median, min, copy]) if o.json => println!(
                "{{\"case\":\"{}\",\"layer\":\"{}\",\"threads\":{},\"ours_ms\":{median:.4},\"ours_min_ms\":{min:.4},\"copy_ms\":{copy:.4}}}",
                case.name,
                case.layer.op().kind(),
                o.threads
            ),
            Ok([median, min, copy]) => {
                println!("{:<28} {median:>10.3} {min:>10.3} {copy:>10.3}", case.name)
            }
            Err(e) if o.json => println!("{{\"case\":\"{}\",\"skipped\":{e:?}}}", case.name),
            Err(e) => println!("{:<28} skipped: {e}", case.name),
        }
    }
    ExitCode::SUCCESS
}
