//! `torchtrtc inspect`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

/// Arguments of `inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// The engine file.
    engine: PathBuf,
    /// Plugin library the engine needs (repeatable).
    #[arg(long = "plugins", value_name = "LIB")]
    plugins: Vec<PathBuf>,
}

/// Prints the engine's summary.
pub fn run(a: InspectArgs) -> Result<()> {
    torchtrt::init_plugins()?;
    for lib in &a.plugins {
        torchtrt::registry()
            .load_library(lib)
            .with_context(|| format!("--plugins {}", lib.display()))?;
    }
    let engine = torchtrt::Runtime::new()?
        .deserialize_file(&a.engine)
        .with_context(|| format!("loading {}", a.engine.display()))?;
    print!("{}", engine.summary());
    Ok(())
}
