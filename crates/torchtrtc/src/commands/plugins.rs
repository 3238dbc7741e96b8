//! `torchtrtc plugins`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use torchtrt::plugin_api::{FieldSpec, FieldType};

/// Arguments of `plugins`.
#[derive(Args)]
pub struct PluginsArgs {
    /// Extension library to load first: plugins, custom ops (repeatable).
    #[arg(
        long = "plugins",
        value_name = "LIB",
        visible_aliases = ["custom-torch-ops", "custom-converters"]
    )]
    plugins: Vec<PathBuf>,
    /// Kernel-plugin spec to register first (repeatable).
    #[arg(long = "kernel-plugins", value_name = "SPEC")]
    kernel_plugins: Vec<PathBuf>,
    /// Also print every field's description.
    #[arg(long)]
    docs: bool,
}

/// Prints the registry as a table: namespace, name, version, source, capabilities (plugin
/// API v2: shape inputs, sized outputs, tactics), fields.
pub fn run(a: PluginsArgs) -> Result<()> {
    torchtrt::init_plugins()?;
    for lib in &a.plugins {
        torchtrt::load_extensions(lib, &torchtrt::LoadOptions::default())
            .with_context(|| format!("--plugins {}", lib.display()))?;
    }
    super::register_kernel_plugins(&a.kernel_plugins)?;
    let rows: Vec<[String; 6]> = torchtrt::registry()
        .creators()
        .iter()
        .map(|c| {
            let namespace = if c.key.namespace.is_empty() {
                "\"\"".to_string()
            } else {
                c.key.namespace.clone()
            };
            let source = match &c.library {
                Some(p) => format!("{} ({})", p.display(), c.provider),
                None if c.provider.starts_with("kernel plugin spec") => {
                    format!("engine spec ({})", c.provider)
                }
                None => format!("built in ({})", c.provider),
            };
            let fields: Vec<String> = c.fields.iter().map(field).collect();
            let capabilities = c.capabilities.names();
            let capabilities = if capabilities.is_empty() {
                "-".to_string()
            } else {
                capabilities.join(", ")
            };
            [
                namespace,
                c.key.name.clone(),
                c.key.version.clone(),
                source,
                capabilities,
                fields.join(", "),
            ]
        })
        .collect();
    let head = [
        "NAMESPACE",
        "NAME",
        "VERSION",
        "SOURCE",
        "CAPABILITIES",
        "FIELDS",
    ]
    .map(String::from);
    let width = |col: usize| {
        rows.iter()
            .chain([&head])
            .map(|r| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..5).map(width).collect();
    for r in [&head].into_iter().chain(&rows) {
        let cells: Vec<String> = r[..5]
            .iter()
            .zip(&w)
            .map(|(cell, &w)| format!("{cell:<w$}"))
            .collect();
        println!("{}  {}", cells.join("  "), r[5]);
    }
    if a.docs {
        for c in torchtrt::registry().creators() {
            println!("\n{}:", c.key);
            for f in &c.fields {
                println!("  {}: {}", field(f), f.doc);
            }
        }
    }
    Ok(())
}

/// A field as `name: type`, `[]` for a list, `?` when optional, `= default` when it has one.
fn field(f: &FieldSpec) -> String {
    let list = if f.ty == FieldType::Char || (f.min_len == 1 && f.max_len == Some(1)) {
        ""
    } else {
        "[]"
    };
    let optional = if f.required { "" } else { "?" };
    let default = f
        .default
        .as_ref()
        .map(|d| format!(" = {d}"))
        .unwrap_or_default();
    format!("{}{optional}: {}{list}{default}", f.name, f.ty)
}
