//! Engines: the built, executable form of a network, and its file format.

mod check;
mod decode;
mod format;
mod inspect;
mod memory;
mod validate;

pub(crate) use check::{check_input, check_input_shapes, check_metas};
pub use format::{FORMAT_VERSION, MAGIC, checksum};
pub use inspect::{EngineSummary, LayerSummary};
pub use memory::MemoryPlan;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DeviceKind, PluginKey, ShapeExpr, TensorDesc};

use crate::backend::{Backend, EngineBlob, Kernel, PluginKernel, PrepareOptions};
use crate::error::{Error, Result};
use crate::layers::{InferInput, LayerKind, TypeShape};
use crate::network::{Layer, NetworkInput, TensorId};
use crate::registry::{PluginRegistry, guard_plugin};

/// The device an engine was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// The host CPU.
    Cpu,
    /// A CUDA device of this compute capability.
    Cuda {
        /// Major version (9 for Hopper).
        major: u32,
        /// Minor version.
        minor: u32,
    },
}

impl Target {
    /// The target a backend builds for.
    pub fn for_backend(backend: &dyn Backend) -> Target {
        match (backend.device(), backend.compute_capability()) {
            (DeviceKind::Cuda, Some((major, minor))) => Target::Cuda { major, minor },
            (DeviceKind::Cuda, None) => Target::Cuda { major: 0, minor: 0 },
            (DeviceKind::Cpu, _) => Target::Cpu,
        }
    }

    /// The device kind.
    pub fn device(self) -> DeviceKind {
        match self {
            Target::Cpu => DeviceKind::Cpu,
            Target::Cuda { .. } => DeviceKind::Cuda,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Cpu => f.write_str("cpu"),
            Target::Cuda { major, minor } => write!(f, "cuda sm_{major}{minor}"),
        }
    }
}

/// Everything an engine file stores: the layers in execution order with their tensors,
/// inputs with their ranges, outputs, per-layer devices and the memory plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnginePlan {
    /// Build target.
    pub target: Target,
    /// Build precision.
    pub precision: DType,
    /// Inputs with their dims and ranges.
    pub inputs: Vec<NetworkInput>,
    /// Outputs: name and tensor.
    pub outputs: Vec<(String, TensorId)>,
    /// Tensor names, indexed by `TensorId`.
    pub tensor_names: Vec<String>,
    /// Tensor dtypes, indexed by `TensorId`.
    pub tensor_dtypes: Vec<DType>,
    /// Layers in execution order.
    pub layers: Vec<Layer>,
    /// The device each layer runs on.
    pub devices: Vec<DeviceKind>,
    /// Names of the layers the builder inserted to change a tensor's layout (reformats).
    pub reformats: Vec<String>,
    /// Activation lifetimes and arena layout.
    pub memory: MemoryPlan,
    /// Build options the kernels are prepared under (stored as the header's flags).
    #[serde(skip)]
    pub options: PrepareOptions,
}

impl EnginePlan {
    /// For each layer, whether it is foldable and every input comes from a constant or from
    /// another such layer, so its outputs are the same on every run (constants themselves
    /// are `false`: they are not computed).
    pub fn constant_derived(&self) -> Vec<bool> {
        let mut constant = vec![false; self.tensor_names.len()];
        self.layers
            .iter()
            .map(|layer| {
                let derived = match &layer.kind {
                    LayerKind::Constant(_) => true,
                    kind => {
                        kind.op().foldable() && layer.inputs.iter().all(|t| constant[t.index()])
                    }
                };
                for t in &layer.outputs {
                    constant[t.index()] = derived;
                }
                derived && !matches!(layer.kind, LayerKind::Constant(_))
            })
            .collect()
    }
}

/// Re-runs shape and dtype inference over a plan, checking that it is well-formed: every
/// tensor defined once before use, arities, dtypes as recorded. Returns each tensor's type.
pub(crate) fn infer_plan(plan: &EnginePlan) -> Result<Vec<TypeShape>> {
    let n = plan.tensor_names.len();
    let bad = |m: String| Error::Engine(m);
    if plan.tensor_dtypes.len() != n || plan.devices.len() != plan.layers.len() {
        return Err(bad("tensor and layer tables disagree in length".into()));
    }
    let mut types: Vec<Option<TypeShape>> = vec![None; n];
    let mut values = vec![None; n];
    let define = |types: &mut Vec<Option<TypeShape>>, t: TensorId, ty: TypeShape| {
        let slot = types
            .get_mut(t.index())
            .ok_or_else(|| bad(format!("tensor #{} does not exist", t.0)))?;
        if slot.is_some() {
            return Err(bad(format!("tensor #{} is defined twice", t.0)));
        }
        if plan.tensor_dtypes[t.index()] != ty.dtype {
            return Err(bad(format!(
                "tensor `{}` is recorded as {} but computes as {}",
                plan.tensor_names[t.index()],
                plan.tensor_dtypes[t.index()],
                ty.dtype
            )));
        }
        *slot = Some(ty);
        Ok(())
    };
    for input in &plan.inputs {
        define(
            &mut types,
            input.tensor,
            TypeShape::new(input.dtype, input.shape()),
        )?;
    }
    for layer in &plan.layers {
        let op = layer.kind.op();
        let (lo, hi) = op.arity();
        if layer.inputs.len() < lo
            || layer.inputs.len() > hi
            || layer.outputs.len() != op.num_outputs()
        {
            return Err(bad(format!(
                "layer `{}` has the wrong number of tensors",
                layer.name
            )));
        }
        let ins: Vec<InferInput<'_>> = layer
            .inputs
            .iter()
            .map(|t| {
                let ty = types
                    .get(t.index())
                    .and_then(Option::as_ref)
                    .ok_or_else(|| {
                        bad(format!(
                            "layer `{}` reads tensor #{} before it exists",
                            layer.name, t.0
                        ))
                    })?;
                Ok(InferInput {
                    dtype: ty.dtype,
                    shape: &ty.shape,
                    value: values[t.index()],
                })
            })
            .collect::<Result<_>>()?;
        let mut outs = op.infer(&ins).map_err(|message| Error::Layer {
            layer: layer.name.clone(),
            kind: op.kind(),
            message,
        })?;
        crate::layers::name_unknown_dims(op, &layer.name, &mut outs);
        if outs.len() != layer.outputs.len() {
            return Err(bad(format!(
                "layer `{}` has the wrong number of outputs",
                layer.name
            )));
        }
        for (&t, ty) in layer.outputs.iter().zip(outs) {
            define(&mut types, t, ty)?;
        }
        if let LayerKind::Constant(c) = &layer.kind {
            values[layer.outputs[0].index()] = Some(c.value.as_ref());
        }
    }
    for (name, t) in &plan.outputs {
        if types.get(t.index()).and_then(Option::as_ref).is_none() {
            return Err(bad(format!("output `{name}` is never computed")));
        }
    }
    types
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            t.ok_or_else(|| {
                bad(format!(
                    "tensor `{}` is never defined",
                    plan.tensor_names[i]
                ))
            })
        })
        .collect()
}

/// Configures every plugin layer of a freshly decoded plan with its build-time
/// descriptions (dtypes, shapes with `-1` for dynamic dims).
pub(crate) fn configure_plugins(plan: &mut EnginePlan) -> Result<()> {
    let types = infer_plan(plan)?;
    for layer in &mut plan.layers {
        if let LayerKind::Plugin(p) = &mut layer.kind {
            let ins: Vec<TensorDesc> = layer
                .inputs
                .iter()
                .map(|t| types[t.index()].build_desc())
                .collect();
            let outs: Vec<TensorDesc> = layer
                .outputs
                .iter()
                .map(|t| types[t.index()].build_desc())
                .collect();
            let plugin = p.plugin().map_err(Error::Engine)?.clone();
            let tactic = p.tactic.as_ref().map_or(0, |t| t.id);
            let configured = guard_plugin(|| {
                let mut c = plugin.clone_plugin();
                c.configure(&ins, &outs)?;
                c.set_tactic(tactic)?;
                Ok(c)
            })
            .map_err(|source| Error::Plugin {
                context: format!("layer `{}` (plugin {})", layer.name, p.key),
                source,
            })?;
            p.set_plugin(Arc::from(configured));
        }
    }
    Ok(())
}

pub(crate) struct EngineInner {
    pub plan: EnginePlan,
    pub types: Vec<TypeShape>,
    pub kernels: Vec<Option<Box<dyn Kernel>>>,
    pub backend: Arc<dyn Backend>,
    pub blobs: Vec<EngineBlob>,
}

/// A built engine, ready to run: cheap to clone, `Send + Sync`; many
/// [`ExecutionContext`]s may run it at once on different threads.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<EngineInner>,
}

/// A tensor at the engine's boundary: name, dtype and shape (dynamic dims by name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoTensor {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape; symbolic dims are those bound at run time.
    pub shape: ShapeExpr,
}

impl Engine {
    /// Prepares every layer's kernel on `backend` and wraps the plan.
    pub(crate) fn from_plan(
        plan: EnginePlan,
        backend: Arc<dyn Backend>,
        blobs: Vec<EngineBlob>,
    ) -> Result<Engine> {
        let types = infer_plan(&plan)?;
        let mut kernels = Vec::with_capacity(plan.layers.len());
        let mut values = vec![None; types.len()];
        for (li, layer) in plan.layers.iter().enumerate() {
            let kernel: Option<Box<dyn Kernel>> =
                match &layer.kind {
                    LayerKind::Constant(c) => {
                        values[layer.outputs[0].index()] = Some(c.value.clone());
                        None
                    }
                    LayerKind::Plugin(p) => {
                        let error = |message: String| Error::Layer {
                            layer: layer.name.clone(),
                            kind: "Plugin",
                            message,
                        };
                        let on_device = plan.devices.get(li) == Some(&backend.device())
                            && backend.device() != DeviceKind::Cpu;
                        let device_kernel = if on_device {
                            let plugin = p.plugin().map_err(error)?.clone();
                            backend.plugin_kernel(&plugin)
                        } else {
                            None
                        };
                        match device_kernel {
                            Some(kernel) => Some(kernel.map_err(error)?),
                            None => Some(Box::new(
                                PluginKernel::new(p, backend.host_threads()).map_err(error)?,
                            )),
                        }
                    }
                    kind => {
                        let ins: Vec<InferInput<'_>> = layer
                            .inputs
                            .iter()
                            .map(|t| InferInput {
                                dtype: types[t.index()].dtype,
                                shape: &types[t.index()].shape,
                                value: values[t.index()].as_deref(),
                            })
                            .collect();
                        Some(backend.prepare_with(kind, &ins, &plan.options).map_err(
                            |message| Error::Layer {
                                layer: layer.name.clone(),
                                kind: kind.op().kind(),
                                message: format!("{} backend: {message}", backend.name()),
                            },
                        )?)
                    }
                };
            kernels.push(kernel);
        }
        Ok(Engine {
            inner: Arc::new(EngineInner {
                plan,
                types,
                kernels,
                backend,
                blobs,
            }),
        })
    }

    /// The plan (layers, tensors, memory plan).
    pub fn plan(&self) -> &EnginePlan {
        &self.inner.plan
    }

    /// Each tensor's inferred dtype and symbolic shape, indexed by `TensorId`.
    pub fn tensor_types(&self) -> &[TypeShape] {
        &self.inner.types
    }

    /// The inputs, in the order `ExecutionContext::execute` takes them.
    pub fn inputs(&self) -> Vec<IoTensor> {
        self.inner
            .plan
            .inputs
            .iter()
            .map(|i| IoTensor {
                name: i.name.clone(),
                dtype: i.dtype,
                shape: i.shape(),
            })
            .collect()
    }

    /// The outputs, in the order `ExecutionContext::execute` returns them.
    pub fn outputs(&self) -> Vec<IoTensor> {
        self.inner
            .plan
            .outputs
            .iter()
            .map(|(name, t)| IoTensor {
                name: name.clone(),
                dtype: self.inner.types[t.index()].dtype,
                shape: self.inner.types[t.index()].shape.clone(),
            })
            .collect()
    }

    /// Per output (engine output order): whether a kernel decides its length at run time
    /// (an output sized by a count, such as non-maximum suppression's selection, or one
    /// computed from it). `output_shapes` gives such an output its upper bound and
    /// `last_output_shapes` its length in a run.
    pub fn data_dependent_outputs(&self) -> Vec<bool> {
        let flags = crate::runtime::data_dependent(&self.inner.plan);
        self.inner
            .plan
            .outputs
            .iter()
            .map(|(_, t)| flags[t.index()])
            .collect()
    }

    /// Checks inputs given by dtype and shape, in the engine's input order, against the
    /// engine's inputs (count, dtypes, ranks, fixed dims, dynamic ranges, named dims that
    /// must agree): what every execution context checks before a run.
    pub fn check_inputs(&self, inputs: &[(DType, &[usize])]) -> Result<()> {
        check_input_shapes(&self.inner.plan, inputs)
    }

    /// The kernel prepared for layer `index` (in execution order); `None` for constant
    /// layers and indices past the end.
    pub fn kernel(&self, index: usize) -> Option<&dyn Kernel> {
        self.inner.kernels.get(index)?.as_deref()
    }

    /// The blobs the engine was deserialized with, and those its backend has to store now
    /// (the latter win on equal names), sorted by name: what [`Engine::serialize`] writes.
    pub fn blobs(&self) -> Vec<EngineBlob> {
        let mut all: std::collections::BTreeMap<String, Vec<u8>> = self
            .inner
            .blobs
            .iter()
            .map(|b| (b.name.clone(), b.data.clone()))
            .collect();
        for b in self.inner.backend.engine_blobs() {
            all.insert(b.name, b.data);
        }
        for b in kernel_plugin_blobs(&self.inner.plan) {
            all.insert(b.name, b.data);
        }
        all.into_iter()
            .map(|(name, data)| EngineBlob { name, data })
            .collect()
    }

    /// The backend the engine's kernels were prepared on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// The build target.
    pub fn target(&self) -> Target {
        self.inner.plan.target
    }

    /// Serializes the engine (see `docs/engine-format.md`).
    pub fn serialize(&self) -> Vec<u8> {
        format::serialize(&self.inner.plan, &self.blobs())
    }

    /// Writes the serialized engine to a file.
    pub fn save(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.serialize()).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads an engine, re-creating its plugins through `registry` and preparing kernels on
    /// the backend matching its target.
    pub fn deserialize(
        bytes: &[u8],
        registry: &PluginRegistry,
        backends: &[Arc<dyn Backend>],
    ) -> Result<Engine> {
        let (plan, blobs) = format::deserialize(bytes, registry)?;
        let backend = backends
            .iter()
            .find(|b| Target::for_backend(b.as_ref()) == plan.target)
            .cloned()
            .ok_or_else(|| {
                let have: Vec<String> = backends
                    .iter()
                    .map(|b| Target::for_backend(b.as_ref()).to_string())
                    .collect();
                Error::Engine(format!(
                    "the engine targets {}, this runtime has {}",
                    plan.target,
                    if have.is_empty() {
                        "no backend".to_string()
                    } else {
                        have.join(", ")
                    }
                ))
            })?;
        backend.install_blobs(&blobs).map_err(|message| {
            Error::Engine(format!(
                "the {} backend cannot use the engine's stored blobs: {message}",
                backend.name()
            ))
        })?;
        Engine::from_plan(plan, backend, blobs)
    }

    /// A summary for `inspect`: inputs, outputs, layers, plugins and required libraries.
    pub fn summary(&self) -> EngineSummary {
        inspect::summarize(self)
    }

    /// The summary of a serialized engine read as records, without re-creating its plugins
    /// or preparing kernels: what `inspect` shows when the plugin libraries an engine needs
    /// are not loaded. Tensors show dtypes but no shapes (those need the plugins).
    pub fn summarize_bytes(bytes: &[u8]) -> Result<EngineSummary> {
        let (plan, blobs) = format::read(bytes)?;
        let mut summary = inspect::summarize_plan(&plan, None);
        summary.blobs = inspect::blob_summaries(&blobs);
        Ok(summary)
    }
}

/// The packages of the plan's kernel plugins, each with its compiled CPU object when a layer
/// of it runs on the CPU.
fn kernel_plugin_blobs(plan: &EnginePlan) -> Vec<EngineBlob> {
    let mut on_cpu: std::collections::BTreeMap<
        String,
        (Arc<crate::kernel_plugin::KernelPackage>, PluginKey, bool),
    > = std::collections::BTreeMap::new();
    for (layer, device) in plan.layers.iter().zip(&plan.devices) {
        if let LayerKind::Plugin(p) = &layer.kind
            && let Some(package) = &p.package
        {
            let entry = on_cpu
                .entry(p.key.to_string())
                .or_insert_with(|| (package.clone(), p.key.clone(), false));
            entry.2 |= *device == DeviceKind::Cpu;
        }
    }
    on_cpu
        .into_values()
        .map(|(package, key, cpu)| package.to_blob(&key, cpu))
        .collect()
}
