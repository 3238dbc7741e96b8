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

#[path = "../benches/common/cases.rs"]
mod cases;

use std::process::ExitCode;
use std::time::Instant;

use rayon::prelude::*;

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

fn run_case(case: &cases::Case, o: &Options, pool: &rayon::ThreadPool) -> Result<Timing, String> {
    let mut prepared = cases::Prepared::new(case)?;
    let ours = median_ms(o.iters, o.warmup, || prepared.run(o.threads))?;
    let (bytes_in, bytes_out) = prepared.bytes();
    let src = cases::random_values((bytes_in + bytes_out) / 8, 7);
    let mut dst = vec![0f32; src.len()];
    let copy = median_ms(o.iters, o.warmup, || {
        dst.copy_from_slice(std::hint::black_box(&src));
        Ok(())
    })?;
    let chunk = src.len().div_ceil(o.threads.max(1) * 4).max(8192);
    let par_copy = median_ms(o.iters, o.warmup, || {
        pool.install(|| {
            dst.par_chunks_mut(chunk)
                .zip(src.par_chunks(chunk))
                .for_each(|(d, s)| d.copy_from_slice(s));
        });
        Ok(())
    })?;
    Ok(Timing {
        out_shape: prepared.out_shape().to_vec(),
        bytes_in,
        bytes_out,
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
    for case in cases::cases() {
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
