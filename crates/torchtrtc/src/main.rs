//! `torchtrtc`: compile ONNX models into torchtrt engines, run, inspect and benchmark them,
//! and list the plugin registry. Exit status: 0 success, 1 failure, 2 usage error.

mod args;
mod calibration;
mod commands;
mod npy;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "torchtrtc",
    version,
    about = "The torchtrt compiler: ONNX → engine, with plugin libraries"
)]
struct Cli {
    /// More logging (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile an ONNX model into an engine file.
    Compile(commands::compile::CompileArgs),
    /// Run a model or engine on inputs from .npy / .pb files.
    Run(commands::run::RunArgs),
    /// Print an engine's inputs, outputs, layers, plugins and required libraries.
    Inspect(commands::inspect::InspectArgs),
    /// List the plugin registry.
    Plugins(commands::plugins::PluginsArgs),
    /// Time a model or engine.
    Bench(commands::bench::BenchArgs),
}

/// Floating-point precision.
#[derive(Clone, Copy, ValueEnum)]
enum Precision {
    /// 32-bit floats.
    F32,
    /// 16-bit floats.
    F16,
    /// bfloat16.
    Bf16,
    /// 8-bit integer convolutions (and, on the CPU, MatMuls), calibrated with
    /// `--calibration` (or read from `--calibration-cache`); f32 elsewhere on the CPU, f16
    /// on CUDA (TensorRT's `--int8 --fp16`).
    Int8,
}

/// Options shared by every command that builds or loads engines.
#[derive(Args, Clone)]
struct BuildOptions {
    /// Target device: `cpu`, `cuda` (the first GPU) or `cuda:N`.
    #[arg(long, default_value = "cpu", value_parser = args::parse_device)]
    device: String,
    /// Floating-point precision of the engine.
    #[arg(long, value_enum, default_value = "f32")]
    precision: Precision,
    /// With `--precision int8`: a folder of calibration inputs, one batch per `.npy` file
    /// (models with one input) or per sub-folder holding `<input>.npy` for each input.
    #[arg(long, value_name = "DIR")]
    calibration: Option<PathBuf>,
    /// With `--precision int8`: a calibration cache, read instead of calibrating when it
    /// exists, written after calibrating otherwise.
    #[arg(long = "calibration-cache", value_name = "PATH")]
    calibration_cache: Option<PathBuf>,
    /// With `--calibration`: how each tensor's range is taken from its values, `minmax`
    /// (the whole range) or `percentile[:P]` (clipped at the P-th percentile of the
    /// magnitudes, 99.99 by default).
    #[arg(long = "calibration-method", value_name = "METHOD", default_value = "minmax", value_parser = args::parse_calibrator)]
    calibration_method: torchtrt::Calibrator,
    /// Let f32 matrix products (MatMul, convolution) use TF32 tensor cores on a GPU
    /// (TensorRT's kTF32): faster, with a 10-bit mantissa for the products. The CPU ignores it.
    #[arg(long)]
    tf32: bool,
    /// Keep element-wise layers as separate kernels instead of fusing chains of them into
    /// one generated kernel (GPU engines).
    #[arg(long = "no-fuse")]
    no_fuse: bool,
    /// Keep every activation channels first instead of letting the GPU backend run chains of
    /// convolutions channels last (with reformats where the layout changes).
    #[arg(long = "no-layouts")]
    no_layouts: bool,
    /// Input shape: NAME=SHAPE (1x3x224x224) or NAME=MIN;OPT;MAX for dynamic dims.
    #[arg(long = "input-shape", value_name = "NAME=SHAPE")]
    input_shapes: Vec<String>,
    /// Plugin library to load before the model is read (repeatable).
    #[arg(long = "plugins", value_name = "LIB")]
    plugins: Vec<PathBuf>,
    /// Kernel-plugin spec (TOML) to register before the model is read (repeatable): a plugin
    /// declared with C and/or CUDA C kernels, compiled here; engines built with it carry it
    /// and load with no library.
    #[arg(long = "kernel-plugins", value_name = "SPEC")]
    kernel_plugins: Vec<PathBuf>,
    /// Load engines that carry native CPU code of kernel plugins (loading runs that code:
    /// only for engines you trust, as you would a plugin library).
    #[arg(long = "allow-engine-host-code")]
    allow_engine_host_code: bool,
    /// Custom-converter library to load before the model is read (repeatable).
    #[arg(long = "custom-converters", value_name = "LIB")]
    custom_converters: Vec<PathBuf>,
    /// Custom-op library to load before the model is read (repeatable); its ops compile
    /// into plugins, and engines using them need the library at run time.
    #[arg(long = "custom-torch-ops", value_name = "LIB")]
    custom_torch_ops: Vec<PathBuf>,
    /// Let library converters replace built-in converters for the same op.
    #[arg(long = "override-converters")]
    override_converters: bool,
    /// Largest tensor a layer may compute, in bytes (suffixes K, M, G, T: powers of 1024);
    /// larger is an error naming the layer, at build time and at run time. Default: the
    /// machine's physical memory.
    #[arg(long = "max-memory", value_name = "BYTES", value_parser = args::parse_bytes)]
    max_memory: Option<u64>,
    /// Timing cache file for plugin tactics: choices found in it are reused instead of
    /// timed, new timings are added to it (created when missing).
    #[arg(long = "timing-cache", value_name = "PATH")]
    timing_cache: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => tracing::Level::ERROR,
        (false, 0) => tracing::Level::WARN,
        (false, 1) => tracing::Level::INFO,
        (false, 2) => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    progress::init(cli.quiet, cli.verbose);
    let result = match cli.command {
        Command::Compile(a) => commands::compile::run(a),
        Command::Run(a) => commands::run::run(a),
        Command::Inspect(a) => commands::inspect::run(a),
        Command::Plugins(a) => commands::plugins::run(a),
        Command::Bench(a) => commands::bench::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, each cause once: a cause whose text the message
/// already ends with (errors that print their source) is not repeated. Line breaks become
/// spaces; other control characters (from names in a model or engine) are escaped, so a
/// hostile name cannot drive the terminal.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line += ": ";
        }
        line += &text;
    }
    line.chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn one_line_joins_causes_and_drops_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(io).context("m.engine: no such file");
        let e = e.context("loading m.engine");
        assert_eq!(one_line(&e), "loading m.engine: m.engine: no such file");
        let e = anyhow::anyhow!("first\nsecond").context("outer");
        assert_eq!(one_line(&e), "outer: first second");
        let e = anyhow::anyhow!("layer `a\x1b[31mb\r` failed");
        assert_eq!(one_line(&e), "layer `a\\u{1b}[31mb\\r` failed");
    }
}
