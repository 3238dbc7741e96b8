//! `torchtrtc inspect`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use torchtrt::EngineSummary;

/// Arguments of `inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// The engine file (or a `.pt2` program, to see its inputs, outputs and ops).
    engine: PathBuf,
    /// Extension library the engine needs: plugins, custom ops (repeatable).
    #[arg(
        long = "plugins",
        value_name = "LIB",
        visible_aliases = ["custom-torch-ops", "custom-converters"]
    )]
    plugins: Vec<PathBuf>,
    /// Load the native CPU code of kernel plugins the engine carries (to show their
    /// tensors' shapes; without it their records are shown).
    #[arg(long = "allow-engine-host-code")]
    allow_engine_host_code: bool,
}

/// The provider name of the built-in plugin library, up to its version.
const BUILTIN_PROVIDER: &str = "torchtrt_plugins";

/// Prints the engine: inputs and outputs with their ranges, layers in execution order with
/// their devices, every plugin with key, fields and source, and what a deployment needs.
pub fn run(a: InspectArgs) -> Result<()> {
    torchtrt::init_plugins()?;
    torchtrt::kernel_plugin::set_engine_host_code_allowed(a.allow_engine_host_code);
    for lib in &a.plugins {
        torchtrt::load_extensions(lib, &torchtrt::LoadOptions::default())
            .with_context(|| format!("--plugins {}", lib.display()))?;
    }
    let bytes = torchtrt::files::read_engine(&a.engine)
        .with_context(|| format!("reading {}", a.engine.display()))?;
    if !bytes.starts_with(&torchtrt::ENGINE_MAGIC) && super::pt2::is_pt2(&a.engine) {
        return super::pt2::inspect(&a.engine);
    }
    if !bytes.starts_with(&torchtrt::ENGINE_MAGIC) {
        let hint = if a.engine.extension().is_some_and(|e| e == "onnx") {
            " (an ONNX model: `torchtrtc compile` it first, or `torchtrtc run` it directly)"
        } else {
            ""
        };
        bail!("{} is not a torchtrt engine{hint}", a.engine.display());
    }
    let s = match torchtrt::Runtime::new()?.deserialize(&bytes) {
        Ok(engine) => engine.summary(),
        Err(e @ torchtrt::Error::PluginNotFound { .. }) => {
            let s = torchtrt::Engine::summarize_bytes(&bytes)
                .with_context(|| format!("loading {}", a.engine.display()))?;
            eprintln!(
                "note: {e}; showing the engine's records (tensor shapes need the plugin: \
                 pass its library with --plugins)"
            );
            s
        }
        Err(e @ torchtrt::Error::Engine(_)) if e.to_string().contains("engine host code") => {
            let s = torchtrt::Engine::summarize_bytes(&bytes)
                .with_context(|| format!("loading {}", a.engine.display()))?;
            eprintln!("note: {e}; showing the engine's records");
            s
        }
        Err(e @ torchtrt::Error::Engine(_)) if is_cuda_engine(&bytes) => {
            let s = torchtrt::Engine::summarize_bytes(&bytes)
                .with_context(|| format!("loading {}", a.engine.display()))?;
            eprintln!(
                "note: {e}; showing the engine's records (which layers run on the host needs \
                 the engine's GPU)"
            );
            s
        }
        Err(e) => return Err(e).with_context(|| format!("loading {}", a.engine.display())),
    };
    println!("engine: {} ({} bytes)", a.engine.display(), bytes.len());
    print!("{}", render(&s));
    Ok(())
}

/// Whether the header says the engine targets a CUDA device.
fn is_cuda_engine(bytes: &[u8]) -> bool {
    bytes.get(12..16) == Some(&1u32.to_le_bytes()[..])
}

/// The summary as `inspect` prints it.
fn render(s: &EngineSummary) -> String {
    let mut out = format!("target: {}\n", s.target);
    if let Some(d) = &s.device {
        out += &format!("device: {d}\n");
    }
    out += "inputs:\n";
    for i in &s.inputs {
        out += &format!("  {}\n", esc(&i.to_string()));
    }
    out += "outputs:\n";
    for o in &s.outputs {
        out += &format!("  {}\n", esc(&o.to_string()));
    }
    out += &format!("layers ({}, in execution order):\n", s.layers.len());
    let width = s
        .layers
        .iter()
        .map(|l| esc(&l.name).len())
        .max()
        .unwrap_or(0);
    for (i, l) in s.layers.iter().enumerate() {
        let place = if l.host_fallback {
            format!("cpu ← copies → {}", l.device)
        } else {
            l.device.to_string()
        };
        out += &format!(
            "  {i:>4} [{place}] {:<width$}  {}{}  {}\n",
            esc(&l.name),
            l.kind,
            l.layout_note(),
            esc(&l.signature.to_string())
        );
    }
    if let Some(line) = s.layouts_line() {
        out += &line;
        out.push('\n');
    }
    let fallbacks = s.layers.iter().filter(|l| l.host_fallback).count();
    if fallbacks > 0 {
        out += &format!(
            "{fallbacks} layer(s) have no kernel on the engine's device: they run on the CPU, \
             with copies of their inputs and outputs inserted\n"
        );
    }
    out += &format!("plugins ({}):\n", s.plugins.len());
    for (p, (library, provider)) in s.plugins.iter().zip(origins(s)) {
        let from = source(library.as_deref(), provider.as_deref());
        out += &format!(
            "  {} {} from {}\n",
            esc(&p.layer),
            esc(&p.key.to_string()),
            esc(&from)
        );
        if let Some(t) = &p.tactic {
            out += &format!("      tactic: {} (id {})\n", esc(&t.name), t.id);
        }
        for f in p.fields.iter() {
            out += &format!(
                "      {}: {} = {}\n",
                esc(&f.name),
                f.value.ty(),
                esc(&f.value.to_string())
            );
        }
    }
    let prefix = torchtrt::kernel_plugin::BLOB_PREFIX;
    let (carried, images): (Vec<_>, Vec<_>) = s
        .blobs
        .iter()
        .partition(|(name, _)| name.starts_with(prefix));
    if !images.is_empty() {
        let total: usize = images.iter().map(|(_, n)| n).sum();
        out += &format!(
            "stored kernel images ({}, {total} bytes; loading needs the driver only):\n",
            images.len()
        );
        for (name, n) in &images {
            out += &format!("  {} ({n} bytes)\n", esc(name));
        }
    }
    if !carried.is_empty() {
        out += &format!(
            "carried kernel plugins ({}; a CPU part is native code: loading it needs \
             --allow-engine-host-code):\n",
            carried.len()
        );
        for (name, n) in &carried {
            out += &format!("  {} ({n} bytes)\n", esc(&name[prefix.len()..]));
        }
    }
    out += &format!(
        "activation memory: {} bytes at opt shapes ({} without reuse)\n",
        s.memory.0, s.memory.1
    );
    out += &esc(&deployment_line(s));
    out.push('\n');
    out
}

/// `s` with control characters (line breaks included) escaped: names come from models
/// and engines, and must not drive the terminal or forge lines.
fn esc(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let e: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            e
        })
        .collect()
}

/// Where each plugin layer's creator came from: `(library, provider)` as the engine records
/// them; `None` library means it was registered in-process (built in, or by the host).
fn origins(s: &EngineSummary) -> Vec<(Option<String>, Option<String>)> {
    s.plugins
        .iter()
        .map(|p| (p.library.clone(), p.provider.clone()))
        .collect()
}

fn is_builtin(provider: Option<&str>) -> bool {
    provider.is_some_and(|v| v.starts_with(BUILTIN_PROVIDER))
}

/// Whether the provider is a kernel-plugin spec, which the engine carries.
fn is_kernel_plugin(provider: Option<&str>) -> bool {
    provider.is_some_and(|v| v.starts_with(KERNEL_PLUGIN_PROVIDER))
}

/// How the registry names the provider of kernel plugins.
const KERNEL_PLUGIN_PROVIDER: &str = "kernel plugin spec";

/// A plugin's source as `inspect` prints it.
fn source(library: Option<&str>, provider: Option<&str>) -> String {
    match (library, provider) {
        (None, Some(provider)) if is_kernel_plugin(Some(provider)) => {
            format!("the engine itself ({provider})")
        }
        (Some(lib), Some(provider)) => format!("{lib} ({provider})"),
        (Some(lib), None) => lib.to_string(),
        (None, Some(provider)) if is_builtin(Some(provider)) => {
            format!("the built-in plugins ({provider})")
        }
        (None, Some(provider)) => format!("{provider} (registered by the host program)"),
        (None, None) => "an unknown provider".to_string(),
    }
}

/// The libraries a deployment of the engine needs: the runtime (with the built-in plugins
/// baked in, or lean plus `libtorchtrt_plugins.so`) and every external plugin library.
pub fn deployment_line(s: &EngineSummary) -> String {
    let mut builtin = BTreeSet::new();
    let mut external = BTreeSet::new();
    let mut hosted = BTreeSet::new();
    for (p, (library, provider)) in s.plugins.iter().zip(origins(s)) {
        match library {
            Some(lib) => {
                external.insert(lib);
            }
            None if is_builtin(provider.as_deref()) => {
                builtin.insert(p.key.name.clone());
            }
            None if is_kernel_plugin(provider.as_deref()) => {}
            None => {
                hosted.insert(format!("{} ({})", p.key, source(None, provider.as_deref())));
            }
        }
    }
    let list = |set: BTreeSet<String>| set.into_iter().collect::<Vec<_>>().join(", ");
    let mut line = if builtin.is_empty() {
        "deployment needs: libtorchtrt_runtime.so (the lean build will do)".to_string()
    } else {
        format!(
            "deployment needs: libtorchtrt_runtime.so with the built-in plugins baked in \
             (or the lean build + libtorchtrt_plugins.so) for {}",
            list(builtin)
        )
    };
    if !external.is_empty() {
        line += &format!("; plus {}", list(external));
    }
    if !hosted.is_empty() {
        line += &format!("; plus the code that registers {}", list(hosted));
    }
    line
}
