//! A readable summary of an engine: what `torchtrtc inspect` prints.

use std::collections::BTreeSet;
use std::fmt;

use torchtrt_plugin_api::{DeviceKind, FieldCollection, PluginKey, Tactic, format_shape};

use super::{Engine, EngineBlob, EnginePlan, TypeShape};
use crate::layers::LayerKind;
use crate::network::Dim;

/// One layer in a summary.
#[derive(Clone, Debug)]
pub struct LayerSummary {
    /// Layer name.
    pub name: String,
    /// Kind, e.g. `Convolution` or `Plugin torch_tensorrt::Interpolate@1`.
    pub kind: String,
    /// Device it runs on.
    pub device: DeviceKind,
    /// Whether the layer of an engine targeted at a device runs on the host instead, with
    /// copies of its inputs and outputs between device and host (its kernel is not one of
    /// the device backend's own: see [`crate::Kernel::as_any`]).
    pub host_fallback: bool,
    /// Inputs and outputs as `name: dtype[shape]`.
    pub signature: String,
    /// Whether the builder inserted the layer to change a tensor's layout (a reformat).
    pub reformat: bool,
    /// Whether the layer reads and writes channels-last activations.
    pub channels_last: bool,
}

/// One plugin layer in a summary.
#[derive(Clone, Debug)]
pub struct PluginSummary {
    /// Layer name.
    pub layer: String,
    /// Registry key.
    pub key: PluginKey,
    /// Serialized fields.
    pub fields: FieldCollection,
    /// Provider at build time.
    pub provider: Option<String>,
    /// Library path at build time.
    pub library: Option<String>,
    /// The tactic the builder chose, if the plugin offered several.
    pub tactic: Option<Tactic>,
}

/// What an engine contains.
#[derive(Clone, Debug)]
pub struct EngineSummary {
    /// Target and precision.
    pub target: String,
    /// The device a loaded engine runs on (`cpu`, `cuda:0`); `None` for records read
    /// without loading the engine.
    pub device: Option<String>,
    /// Inputs with their ranges, one line each.
    pub inputs: Vec<String>,
    /// Outputs, one line each.
    pub outputs: Vec<String>,
    /// Layers in execution order.
    pub layers: Vec<LayerSummary>,
    /// Plugin layers.
    pub plugins: Vec<PluginSummary>,
    /// Libraries (or providers) a deployment must load for the plugins.
    pub required_libraries: Vec<String>,
    /// Activation arena at opt shapes and the sum without reuse, in bytes.
    pub memory: (u64, u64),
    /// Blobs stored for the backend (e.g. compiled GPU programs): name and size in bytes.
    pub blobs: Vec<(String, usize)>,
}

impl LayerSummary {
    /// What the layer does to layouts, as a note after its kind: ` (reformat)`,
    /// ` (channels last)` or nothing.
    pub fn layout_note(&self) -> &'static str {
        if self.reformat {
            " (reformat)"
        } else if self.channels_last {
            " (channels last)"
        } else {
            ""
        }
    }
}

impl EngineSummary {
    /// How many layers run channels last and how many reformats change a layout, as one
    /// line; `None` for an engine with neither.
    pub fn layouts_line(&self) -> Option<String> {
        let reformats = self.layers.iter().filter(|l| l.reformat).count();
        let last = self.layers.iter().filter(|l| l.channels_last).count();
        (reformats + last > 0).then(|| {
            format!(
                "layouts: {last} layer(s) run channels last, {reformats} reformat(s) change a \
                 tensor's layout"
            )
        })
    }
}

pub(crate) fn summarize(engine: &Engine) -> EngineSummary {
    let mut summary = summarize_plan(engine.plan(), Some(engine.tensor_types()));
    summary.device = Some(engine.backend().name());
    if engine.plan().target.device() != DeviceKind::Cpu {
        for (li, layer) in summary.layers.iter_mut().enumerate() {
            layer.host_fallback = engine
                .kernel(li)
                .is_some_and(|k| k.placement() == crate::backend::Placement::Host);
        }
    }
    summary.blobs = blob_summaries(&engine.blobs());
    summary
}

pub(crate) fn blob_summaries(blobs: &[EngineBlob]) -> Vec<(String, usize)> {
    blobs
        .iter()
        .map(|b| (b.name.clone(), b.data.len()))
        .collect()
}

/// The summary of `plan`; tensors show their shapes when `types` are known (they need
/// every plugin's shape rules), else only their dtypes.
pub(crate) fn summarize_plan(plan: &EnginePlan, types: Option<&[TypeShape]>) -> EngineSummary {
    let show = |t: &crate::network::TensorId| {
        let i = t.index();
        match types.and_then(|ty| ty.get(i)) {
            Some(ty) => format!(
                "{}: {}{}",
                plan.tensor_names[i],
                ty.dtype,
                format_shape(&ty.shape)
            ),
            None => format!("{}: {}", plan.tensor_names[i], plan.tensor_dtypes[i]),
        }
    };
    let inputs = plan
        .inputs
        .iter()
        .map(|i| {
            let ranges: Vec<String> = i
                .dims
                .iter()
                .filter_map(|d| match d {
                    Dim::Dynamic {
                        name,
                        min,
                        opt,
                        max,
                    } => Some(format!("{name} ∈ [{min}, {max}] opt {opt}")),
                    Dim::Fixed(_) => None,
                })
                .collect();
            let mut line = show(&i.tensor);
            if !ranges.is_empty() {
                line += &format!("  ({})", ranges.join(", "));
            }
            line
        })
        .collect();
    let outputs = plan
        .outputs
        .iter()
        .map(|(n, t)| format!("{n} = {}", show(t)))
        .collect();
    let mut plugins = Vec::new();
    let layers = plan
        .layers
        .iter()
        .zip(&plan.devices)
        .map(|(l, d)| {
            let kind = match &l.kind {
                LayerKind::Plugin(p) => {
                    plugins.push(PluginSummary {
                        layer: l.name.clone(),
                        key: p.key.clone(),
                        fields: p.fields.clone(),
                        provider: p.provider.clone(),
                        library: p.library.clone(),
                        tactic: p.tactic.clone(),
                    });
                    format!("Plugin {}", p.key)
                }
                k => k.op().kind().to_string(),
            };
            let ins: Vec<String> = l.inputs.iter().map(show).collect();
            let outs: Vec<String> = l.outputs.iter().map(show).collect();
            LayerSummary {
                name: l.name.clone(),
                kind,
                device: *d,
                host_fallback: false,
                signature: format!("({}) -> ({})", ins.join(", "), outs.join(", ")),
                reformat: plan.reformats.contains(&l.name),
                channels_last: match &l.kind {
                    LayerKind::Convolution(c) => c.channels_last,
                    LayerKind::QuantizedConvolution(q) => q.conv.channels_last,
                    _ => false,
                },
            }
        })
        .collect();
    let required: BTreeSet<String> = plugins
        .iter()
        .map(|p| {
            p.library
                .clone()
                .or_else(|| p.provider.clone())
                .unwrap_or_else(|| "unknown provider".to_string())
        })
        .collect();
    EngineSummary {
        target: format!(
            "{} ({}{})",
            plan.target,
            plan.precision,
            if plan.options.tf32 { ", tf32" } else { "" }
        ),
        device: None,
        inputs,
        outputs,
        layers,
        plugins,
        required_libraries: required.into_iter().collect(),
        memory: (plan.memory.arena_bytes, plan.memory.naive_bytes),
        blobs: Vec::new(),
    }
}

impl fmt::Display for EngineSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "target: {}", self.target)?;
        if let Some(d) = &self.device {
            writeln!(f, "device: {d}")?;
        }
        writeln!(f, "inputs:")?;
        for i in &self.inputs {
            writeln!(f, "  {i}")?;
        }
        writeln!(f, "outputs:")?;
        for o in &self.outputs {
            writeln!(f, "  {o}")?;
        }
        writeln!(f, "layers ({}):", self.layers.len())?;
        for (i, l) in self.layers.iter().enumerate() {
            let place = if l.host_fallback {
                format!("cpu, copies from/to {}", l.device)
            } else {
                l.device.to_string()
            };
            writeln!(
                f,
                "  {i:>4} [{place}] {} {}{} {}",
                l.name,
                l.kind,
                l.layout_note(),
                l.signature
            )?;
        }
        if let Some(line) = self.layouts_line() {
            writeln!(f, "{line}")?;
        }
        writeln!(f, "plugins ({}):", self.plugins.len())?;
        for p in &self.plugins {
            let fields: Vec<String> = p
                .fields
                .iter()
                .map(|fl| format!("{}={}", fl.name, fl.value))
                .collect();
            writeln!(
                f,
                "  {} {} from {}: {}",
                p.layer,
                p.key,
                p.library
                    .as_deref()
                    .or(p.provider.as_deref())
                    .unwrap_or("unknown provider"),
                fields.join(" ")
            )?;
        }
        if !self.blobs.is_empty() {
            writeln!(f, "stored blobs ({}):", self.blobs.len())?;
            for (name, len) in &self.blobs {
                writeln!(f, "  {name} ({len} bytes)")?;
            }
        }
        writeln!(
            f,
            "activation memory: {} bytes at opt shapes ({} without reuse)",
            self.memory.0, self.memory.1
        )?;
        if self.required_libraries.is_empty() {
            writeln!(f, "deployment needs: no plugin libraries")
        } else {
            writeln!(
                f,
                "deployment needs: {}",
                self.required_libraries.join(", ")
            )
        }
    }
}
