//! `torchtrtc compile`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::BuildOptions;
use crate::progress::Progress;

/// Arguments of `compile`.
#[derive(Args)]
pub struct CompileArgs {
    /// The ONNX model or `.pt2` program (torch.export archive).
    model: PathBuf,
    /// Where to write the engine.
    #[arg(short, long)]
    output: PathBuf,
    /// Input shape: NAME=SHAPE (1x3x224x224) or NAME=MIN;OPT;MAX (same as --input-shape).
    #[arg(long = "input", value_name = "NAME=SHAPE")]
    inputs: Vec<String>,
    #[command(flatten)]
    build: BuildOptions,
}

/// Compiles the model and writes the engine.
pub fn run(a: CompileArgs) -> Result<()> {
    let mut build = a.build.clone();
    build.input_shapes.extend(a.inputs.iter().cloned());
    let progress = Progress::stages(5);
    progress.stage("loading libraries");
    super::load_libraries(&build)?;
    let engine = super::compile_model(&a.model, &build, &[], &progress)?;
    progress.stage("serializing");
    let bytes = engine.serialize();
    std::fs::write(&a.output, &bytes).with_context(|| format!("writing {}", a.output.display()))?;
    progress.finish();
    let summary = engine.summary();
    println!(
        "{} → {} ({} layers, {} plugin layers, {} bytes)",
        a.model.display(),
        a.output.display(),
        summary.layers.len(),
        summary.plugins.len(),
        bytes.len()
    );
    println!("{}", super::inspect::deployment_line(&summary));
    Ok(())
}
