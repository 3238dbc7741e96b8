//! Times every plugin case of the CPU benchmark table against a plain memory copy of the
//! same bytes.
//!
//! ```text
//! cargo run --release -p torchtrt-plugins --example bench_plugins -- [--json] [--iters N]
//!     [--warmup N] [--threads N] [--filter SUBSTRING]
//! ```
//!
//! Each case reports the median of `--iters` timed runs after `--warmup` runs. The copy
//! moves `(input bytes + output bytes) / 2` bytes between two preallocated buffers, so it
//! reads and writes as many bytes as the plugin touches at least once: `copy_ms` is one
//! plain `memcpy` (what `np.copyto` does), `par_copy_ms` the same bytes copied by
//! `--threads` threads; `copy_fraction = copy_ms / ours_ms`. With `--json` every case is
//! one JSON object per line (a case whose plugin cannot be created is a line with
//! `"skipped"`).

use std::process::ExitCode;
use std::time::Instant;

use rayon::prelude::*;
use torchtrt_plugin_api::{
    CpuLaunch, DType, FieldCollection, HostTensor, HostTensorMut, Launch, Plugin, TensorDesc,
    const_shape, create_plugin, numel, shape_values,
};

/// One row of the benchmark table.
struct Case {
    name: &'static str,
    plugin: &'static str,
    fields: FieldCollection,
    shape: Vec<i64>,
}

fn cases() -> Vec<Case> {
    let big = vec![8, 64, 64, 64];
    let interp = |mode: &str, size: [i64; 2]| {
        FieldCollection::new()
            .with("mode", mode)
            .with("out_size", size.to_vec())
            .with("align_corners", 0i32)
            .with("use_scales", 0i32)
    };
    let channels: Vec<f32> = (0..64).map(|c| 0.5 + c as f32 / 64.0).collect();
    let shifts: Vec<f32> = (0..64).map(|c| c as f32 / 32.0 - 1.0).collect();
    vec![
        Case {
            name: "resize_linear_x2",
            plugin: "Interpolate",
            fields: interp("bilinear", [128, 128]),
            shape: big.clone(),
        },
        Case {
            name: "resize_linear_align_corners_x2",
            plugin: "Interpolate",
            fields: interp("bilinear", [128, 128]).with("align_corners", 1i32),
            shape: big.clone(),
        },
        Case {
            name: "resize_nearest_x2",
            plugin: "Interpolate",
            fields: interp("nearest", [128, 128]),
            shape: big.clone(),
        },
        Case {
            name: "lp_normalization_p2_axis1",
            plugin: "NormalizePlugin",
            fields: FieldCollection::new()
                .with("order", 2.0f32)
                .with("axes", vec![1i32])
                .with("mode", "normalize"),
            shape: big.clone(),
        },
        Case {
            name: "instance_normalization",
            plugin: "InstanceNormalization_TRT",
            fields: FieldCollection::new()
                .with("epsilon", 1e-5f32)
                .with("scales", channels)
                .with("bias", shifts),
            shape: big.clone(),
        },
        Case {
            name: "gelu_erf",
            plugin: "CustomGeluPluginDynamic",
            fields: FieldCollection::new().with("approximate", "none"),
            shape: big.clone(),
        },
        Case {
            name: "gelu_tanh",
            plugin: "CustomGeluPluginDynamic",
            fields: FieldCollection::new().with("approximate", "tanh"),
            shape: big.clone(),
        },
        Case {
            name: "global_max_pool",
            plugin: "Interpolate",
            fields: interp("adaptive_max_pool2d", [1, 1]),
            shape: big.clone(),
        },
        Case {
            name: "adaptive_max_pool_64_to_32",
            plugin: "Interpolate",
            fields: interp("adaptive_max_pool2d", [32, 32]),
            shape: big,
        },
        Case {
            name: "adaptive_max_pool_30x45_to_7x7",
            plugin: "Interpolate",
            fields: interp("adaptive_max_pool2d", [7, 7]),
            shape: vec![8, 64, 30, 45],
        },
    ]
}

/// Command-line options.
struct Options {
    json: bool,
    iters: usize,
    warmup: usize,
    threads: usize,
    filter: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        json: false,
        iters: 30,
        warmup: 5,
        threads: 2,
        filter: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--json" => o.json = true,
            "--iters" => o.iters = parse_count(&value("--iters")?)?,
            "--warmup" => o.warmup = parse_count(&value("--warmup")?)?,
            "--threads" => o.threads = parse_count(&value("--threads")?)?,
            "--filter" => o.filter = Some(value("--filter")?),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    o.iters = o.iters.max(1);
    Ok(o)
}

fn parse_count(s: &str) -> Result<usize, String> {
    s.parse().map_err(|_| format!("`{s}` is not a count"))
}

/// Deterministic values in `[-3, 3)`.
fn random_values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 6.0 - 3.0
        })
        .collect()
}

fn median_ms(
    iters: usize,
    warmup: usize,
    mut f: impl FnMut() -> Result<(), String>,
) -> Result<Stats, String> {
    for _ in 0..warmup {
        f()?;
    }
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(Stats {
        median: times[times.len() / 2],
        min: times[0],
    })
}

/// Median and fastest of the timed runs, in milliseconds.
struct Stats {
    median: f64,
    min: f64,
}

/// Result of one case.
struct Timing {
    out_shape: Vec<i64>,
    bytes_in: usize,
    bytes_out: usize,
    ours: Stats,
    copy: Stats,
    par_copy: Stats,
}

fn run_case(case: &Case, o: &Options, pool: &rayon::ThreadPool) -> Result<Timing, String> {
    let creator = torchtrt_plugins::register::creators()
        .into_iter()
        .find(|c| c.key().name == case.plugin)
        .ok_or_else(|| format!("no built-in plugin `{}`", case.plugin))?;
    let mut plugin: Box<dyn Plugin> =
        create_plugin(creator.as_ref(), case.name, &case.fields).map_err(|e| e.to_string())?;
    let out = plugin
        .output_shapes(&[const_shape(&case.shape)])
        .map_err(|e| e.to_string())?;
    let out_shape = out
        .first()
        .and_then(|s| shape_values(s))
        .ok_or("output shape is not constant")?;
    let in_desc = TensorDesc::new(DType::F32, case.shape.clone());
    let out_desc = TensorDesc::new(DType::F32, out_shape.clone());
    plugin
        .configure(
            std::slice::from_ref(&in_desc),
            std::slice::from_ref(&out_desc),
        )
        .map_err(|e| e.to_string())?;
    let n_in = numel(&case.shape).ok_or("bad input shape")?;
    let n_out = numel(&out_shape).ok_or("bad output shape")?;
    let x = random_values(n_in, 0x9e37_79b9_7f4a_7c15);
    let mut y = vec![0f32; n_out];
    let ours = median_ms(o.iters, o.warmup, || {
        let inputs = [HostTensor {
            desc: in_desc.clone(),
            data: bytemuck::cast_slice(&x),
        }];
        let mut outputs = [HostTensorMut {
            desc: out_desc.clone(),
            data: bytemuck::cast_slice_mut(&mut y),
        }];
        plugin
            .enqueue(Launch::Cpu(CpuLaunch {
                inputs: &inputs,
                outputs: &mut outputs,
                workspace: &mut [],
                threads: o.threads,
            }))
            .map_err(|e| e.to_string())
    })?;
    let copy_len = (n_in + n_out) / 2;
    let src = random_values(copy_len, 7);
    let mut dst = vec![0f32; copy_len];
    let chunk = copy_len.div_ceil(o.threads.max(1) * 4).max(8192);
    let copy = median_ms(o.iters, o.warmup, || {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        Ok(())
    })?;
    let par_copy = median_ms(o.iters, o.warmup, || {
        pool.install(|| {
            dst.par_chunks_mut(chunk)
                .zip(src.par_chunks(chunk))
                .for_each(|(d, s)| d.copy_from_slice(s));
        });
        Ok(())
    })?;
    Ok(Timing {
        out_shape,
        bytes_in: n_in * 4,
        bytes_out: n_out * 4,
        ours,
        copy,
        par_copy,
    })
}

fn shape_json(s: &[i64]) -> String {
    let dims: Vec<String> = s.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench_plugins: {e}");
            return ExitCode::from(2);
        }
    };
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads.max(1))
        .build()
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench_plugins: cannot start {} threads: {e}", o.threads);
            return ExitCode::FAILURE;
        }
    };
    if !o.json {
        println!(
            "{:<32} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "case", "ours ms", "ours min", "copy ms", "copy min", "par copy", "fraction"
        );
    }
    for case in cases() {
        if o.filter.as_deref().is_some_and(|f| !case.name.contains(f)) {
            continue;
        }
        match run_case(&case, &o, &pool) {
            Ok(t) if o.json => println!(
                "{{\"case\":\"{}\",\"plugin\":\"{}\",\"shape\":{},\"out_shape\":{},\"bytes_in\":{},\"bytes_out\":{},\"threads\":{},\"ours_ms\":{:.4},\"ours_min_ms\":{:.4},\"copy_ms\":{:.4},\"copy_min_ms\":{:.4},\"par_copy_ms\":{:.4},\"copy_fraction\":{:.3}}}",
                case.name,
                case.plugin,
                shape_json(&case.shape),
                shape_json(&t.out_shape),
                t.bytes_in,
                t.bytes_out,
                o.threads,
                t.ours.median,
                t.ours.min,
                t.copy.median,
                t.copy.min,
                t.par_copy.median,
                t.copy.median / t.ours.median
            ),
            Ok(t) => println!(
                "{:<32} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.2}",
                case.name,
                t.ours.median,
                t.ours.min,
                t.copy.median,
                t.copy.min,
                t.par_copy.median,
                t.copy.median / t.ours.median
            ),
            Err(e) if o.json => println!(
                "{{\"case\":\"{}\",\"plugin\":\"{}\",\"skipped\":{:?}}}",
                case.name, case.plugin, e
            ),
            Err(e) => println!("{:<32} skipped: {e}", case.name),
        }
    }
    ExitCode::SUCCESS
}
