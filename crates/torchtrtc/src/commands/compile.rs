//! `torchtrtc compile`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::BuildOptions;

/// Arguments of `compile`.
#[derive(Args)]
pub struct CompileArgs {
    /// The ONNX model.
    model: PathBuf,
    /// Where to write the engine.
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    build: BuildOptions,
}

/// Compiles the model and writes the engine.
pub fn run(a: CompileArgs) -> Result<()> {
    super::load_libraries(&a.build)?;
    let engine = super::compile_onnx(&a.model, &a.build)?;
    let bytes = engine.serialize();
    std::fs::write(&a.output, &bytes).with_context(|| format!("writing {}", a.output.display()))?;
    let summary = engine.summary();
    println!(
        "{} → {} ({} layers, {} plugin layers, {} bytes)",
        a.model.display(),
        a.output.display(),
        summary.layers.len(),
        summary.plugins.len(),
        bytes.len()
    );
    if !summary.required_libraries.is_empty() {
        println!(
            "deployment needs: {}",
            summary.required_libraries.join(", ")
        );
    }
    Ok(())
}
