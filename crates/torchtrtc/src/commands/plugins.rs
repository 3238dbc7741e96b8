//! `torchtrtc plugins`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

/// Arguments of `plugins`.
#[derive(Args)]
pub struct PluginsArgs {
    /// Plugin library to load first (repeatable).
    #[arg(long = "plugins", value_name = "LIB")]
    plugins: Vec<PathBuf>,
}

/// Prints the registry as a table: namespace, name, version, fields, source.
pub fn run(a: PluginsArgs) -> Result<()> {
    torchtrt::init_plugins()?;
    for lib in &a.plugins {
        torchtrt::registry()
            .load_library(lib)
            .with_context(|| format!("--plugins {}", lib.display()))?;
    }
    println!(
        "{:<16} {:<28} {:<8} {:<40} fields",
        "namespace", "name", "version", "source"
    );
    for c in torchtrt::registry().creators() {
        let source = match &c.library {
            Some(p) => format!("{} ({})", c.provider, p.display()),
            None => format!("{} (built in)", c.provider),
        };
        let ns = if c.key.namespace.is_empty() {
            "\"\""
        } else {
            &c.key.namespace
        };
        println!(
            "{ns:<16} {:<28} {:<8} {source:<40}",
            c.key.name, c.key.version
        );
        for f in &c.fields {
            let default = f
                .default
                .as_ref()
                .map(|d| format!(" = {d}"))
                .unwrap_or_default();
            let req = if f.required { "required" } else { "optional" };
            println!(
                "{:>18}{}: {} ({req}, {} values){default} — {}",
                "",
                f.name,
                f.ty,
                f.len_rule(),
                f.doc
            );
        }
    }
    Ok(())
}
