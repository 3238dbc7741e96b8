//! One module per sub-command, plus what they share: loading libraries and models.

pub mod bench;
pub mod compile;
pub mod inspect;
pub mod plugins;
pub mod run;

use std::path::Path;

use anyhow::{Context, Result};
use torchtrt::plugin_api::DType;
use torchtrt::{BuildConfig, Engine};

use crate::{BuildOptions, Precision};

/// Registers the built-ins and loads every `--plugins` library, before any model is read.
pub fn load_libraries(opts: &BuildOptions) -> Result<()> {
    torchtrt::init_plugins()?;
    for lib in &opts.plugins {
        let info = torchtrt::registry()
            .load_library(lib)
            .with_context(|| format!("--plugins {}", lib.display()))?;
        tracing::info!(library = %info.path.display(), provider = info.provider, registered = info.registered.len(), "loaded plugin library");
    }
    Ok(())
}

/// The build configuration the options ask for.
pub fn build_config(opts: &BuildOptions) -> BuildConfig {
    BuildConfig {
        precision: match opts.precision {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
            Precision::Bf16 => DType::BF16,
        },
        ..BuildConfig::default()
    }
}

/// An engine from an `.engine` file, or compiled from an ONNX model.
pub fn load_or_compile(path: &Path, opts: &BuildOptions) -> Result<Engine> {
    load_libraries(opts)?;
    let is_engine = std::fs::read(path)
        .map(|b| b.starts_with(&torchtrt::ENGINE_MAGIC))
        .with_context(|| format!("reading {}", path.display()))?;
    if is_engine {
        return torchtrt::Runtime::new()?
            .deserialize_file(path)
            .with_context(|| format!("loading engine {}", path.display()));
    }
    compile_onnx(path, opts)
}

/// Imports and compiles an ONNX model.
pub fn compile_onnx(path: &Path, opts: &BuildOptions) -> Result<Engine> {
    let mut options = torchtrt::onnx::ImportOptions::default();
    for spec in &opts.input_shapes {
        let (name, dims) = crate::args::parse_input_shape(spec)?;
        options.input_dims.insert(name, dims);
    }
    let net = torchtrt::import_onnx(path, options)
        .with_context(|| format!("importing {}", path.display()))?;
    torchtrt::compile(&net, &build_config(opts))
        .with_context(|| format!("compiling {}", path.display()))
}
