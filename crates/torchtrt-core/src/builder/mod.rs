//! The builder: network → engine. Infers every tensor's dtype and shape (errors name the
//! layer), drops layers no output needs, folds constant sub-graphs, converts precision,
//! negotiates plugin formats, orders execution and plans activation memory.

mod attention_heads;
mod fold;
mod fold_transpose;
mod fuse;
mod fuse_attention;
mod fuse_elementwise;
mod fuse_linear_late;
mod fuse_matmul_scale;
mod layouts;
mod memory;
mod negotiate;
mod passes;
mod quantize;
mod reshaped_transpose;
mod split_products;
mod tactics;
mod timing_cache;
mod uses;

pub use passes::passes;
pub use quantize::{Int8Calibration, TensorRange};
pub use timing_cache::{CachedTactic, MAX_TIMING_CACHE_BYTES, TimingCache};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use torchtrt_plugin_api::{DType, DeviceKind};

use crate::backend::{Backend, PrepareOptions};
use crate::engine::{Engine, EnginePlan, MemoryPlan, Target};
use crate::error::{Error, Result};
use crate::layers::{Cast, Constant, ConstantOfShape, InferInput, LayerKind, TypeShape};
use crate::network::{Layer, NetworkDefinition, NetworkInput, TensorId};
use crate::tensor::Tensor;

/// How to build an engine.
#[derive(Clone, Debug)]
pub struct BuildConfig {
    /// The device the engine targets.
    pub device: DeviceKind,
    /// Precision of floating-point computation: `F32`, `F16` or `BF16`. With a reduced
    /// precision, f32 inputs are cast on entry, f32 weights converted, and float outputs
    /// cast back to f32.
    pub precision: DType,
    /// Evaluate layers whose inputs are all constants at build time.
    pub fold_constants: bool,
    /// Largest output (elements) a folded layer may produce.
    pub max_fold_elements: usize,
    /// Let f32 matrix products use TF32 tensor cores (TensorRT's `kTF32`); off by default,
    /// so f32 engines compute in full f32. Stored in the engine; the CPU ignores it.
    pub tf32: bool,
    /// On backends that generate one kernel per element-wise group
    /// ([`Backend::fuses_elementwise`]): group element-wise layers into `Fused` layers, and
    /// fold transposes of the last two dims into the MatMul reading them. On by default.
    pub fuse_elementwise: bool,
    /// Replace exported scaled-dot-product attention (MatMul, scale, mask, Softmax,
    /// MatMul) by one `Attention` layer. On by default.
    pub fuse_attention: bool,
    /// Let the backend run convolutions, and the element-wise layers between them, channels
    /// last where that moves fewer elements ([`Backend::channels_last`]), with reformat
    /// layers between layouts. On by default.
    pub layouts: bool,
    /// Largest tensor (bytes) a layer may compute at the profile's largest shapes; a
    /// larger one is a build error naming the layer. `None`: the machine's physical memory.
    pub max_memory: Option<u64>,
    /// Where plugin tactic timings are looked up and recorded ([`TimingCache`]); `None`:
    /// every build times the tactics of the plugins that offer several.
    pub timing_cache: Option<Arc<Mutex<TimingCache>>>,
    /// INT8 (TensorRT's `kINT8` with a calibrator): the calibrated ranges of the tensors
    /// convolutions and MatMuls read; those the backend runs on integers
    /// ([`Backend::runs_integer`]) then run on 8-bit integers, with per-channel weight
    /// scales, the rest in [`Self::precision`]. `None`: only a model's own
    /// quantize/dequantize pairs are.
    pub int8: Option<Arc<Int8Calibration>>,
}

impl BuildConfig {
    /// The memory limit in bytes: [`Self::max_memory`] or the machine's physical memory.
    pub fn memory_limit(&self) -> u64 {
        self.max_memory
            .unwrap_or_else(crate::limits::physical_memory)
    }
}

impl Default for BuildConfig {
    fn default() -> BuildConfig {
        BuildConfig {
            device: DeviceKind::Cpu,
            precision: DType::F32,
            fold_constants: true,
            max_fold_elements: 1 << 24,
            tf32: false,
            fuse_elementwise: true,
            fuse_attention: true,
            layouts: true,
            max_memory: None,
            timing_cache: None,
            int8: None,
        }
    }
}

/// What the builder knows about one tensor.
#[derive(Clone, Default)]
pub(crate) struct TensorInfo {
    pub name: String,
    pub ty: Option<TypeShape>,
    pub value: Option<Arc<Tensor>>,
    /// For constant weights folded from a `Dequantize` of integers: those integers.
    pub quantized: Option<Arc<quantize::QuantizedWeights>>,
}

/// The graph under construction: layers are emitted in execution order.
pub(crate) struct Work {
    pub tensors: Vec<TensorInfo>,
    pub layers: Vec<Layer>,
    pub devices: Vec<DeviceKind>,
    /// Names of the reformat layers the layout pass inserted.
    pub reformats: HashSet<String>,
    /// The optimum value of every dynamic dimension of the network's inputs.
    pub opt: HashMap<String, i64>,
}

impl crate::shape_arith::ShapeGraph for Work {
    fn ty(&self, t: TensorId) -> &TypeShape {
        Work::ty(self, t)
    }

    fn value(&self, t: TensorId) -> Option<&Tensor> {
        self.tensors[t.index()].value.as_deref()
    }

    fn producer(&self, t: TensorId) -> Option<(&LayerKind, &[TensorId])> {
        Work::producer(self, t).map(|l| (&l.kind, &l.inputs[..]))
    }
}

impl Work {
    pub fn new_tensor(&mut self, name: String) -> TensorId {
        self.tensors.push(TensorInfo {
            name,
            ..TensorInfo::default()
        });
        TensorId(self.tensors.len() as u32 - 1)
    }

    pub fn ty(&self, t: TensorId) -> &TypeShape {
        self.tensors[t.index()]
            .ty
            .as_ref()
            .unwrap_or_else(|| unreachable!("tensor {} used before inference", t.0))
    }

    /// The layer producing `t`.
    pub fn producer(&self, t: TensorId) -> Option<&Layer> {
        self.layers.iter().rev().find(|l| l.outputs.contains(&t))
    }

    pub fn infer_inputs(&self, inputs: &[TensorId]) -> Vec<InferInput<'_>> {
        inputs
            .iter()
            .map(|&t| {
                let ty = self.ty(t);
                InferInput {
                    dtype: ty.dtype,
                    shape: &ty.shape,
                    value: self.tensors[t.index()].value.as_deref(),
                }
            })
            .collect()
    }

    /// Infers `kind` on `inputs`, with errors naming the layer.
    pub fn infer(
        &self,
        name: &str,
        kind: &LayerKind,
        inputs: &[TensorId],
    ) -> Result<Vec<TypeShape>> {
        let op = kind.op();
        let ins = self.infer_inputs(inputs);
        let mut outs = op.infer(&ins).map_err(|message| Error::Layer {
            layer: name.to_string(),
            kind: op.kind(),
            message,
        })?;
        crate::layers::name_unknown_dims(op, name, &mut outs);
        crate::shape_arith::sharpen(self, name, kind, inputs, &mut outs);
        Ok(outs)
    }

    /// Appends a layer whose outputs are the given (typed) tensors.
    pub fn emit(&mut self, layer: Layer, types: Vec<TypeShape>, device: DeviceKind) {
        if let LayerKind::Constant(c) = &layer.kind {
            self.tensors[layer.outputs[0].index()].value = Some(c.value.clone());
        }
        for (&t, ty) in layer.outputs.iter().zip(types) {
            self.tensors[t.index()].ty = Some(ty);
        }
        self.layers.push(layer);
        self.devices.push(device);
    }

    /// Inserts a constant layer `name` holding `value` at position `pos` (on the CPU, as
    /// constants are) and returns its tensor.
    pub fn insert_constant(&mut self, pos: usize, name: String, value: Tensor) -> TensorId {
        let t = self.new_tensor(name.clone());
        let shape = value.shape().iter().map(|&d| (d as i64).into()).collect();
        let value = Arc::new(value);
        self.tensors[t.index()].ty = Some(TypeShape::new(value.dtype(), shape));
        self.tensors[t.index()].value = Some(value.clone());
        self.layers.insert(
            pos,
            Layer {
                name,
                kind: LayerKind::Constant(Constant { value, slot: 0 }),
                inputs: vec![],
                outputs: vec![t],
            },
        );
        self.devices.insert(pos, DeviceKind::Cpu);
        t
    }

    /// Emits a constant layer `name` holding `value` and returns its tensor.
    pub fn emit_constant(&mut self, name: String, value: Tensor) -> TensorId {
        let t = self.new_tensor(name.clone());
        let shape = value.shape().iter().map(|&d| (d as i64).into()).collect();
        let ty = TypeShape::new(value.dtype(), shape);
        self.emit(
            Layer {
                name,
                kind: LayerKind::Constant(Constant::new(value)),
                inputs: vec![],
                outputs: vec![t],
            },
            vec![ty],
            DeviceKind::Cpu,
        );
        t
    }

    /// Emits a cast of `input` to `to` and returns the cast's output.
    pub fn emit_cast(
        &mut self,
        input: TensorId,
        to: DType,
        device: DeviceKind,
    ) -> Result<TensorId> {
        let name = format!("{}/cast_{}", self.tensors[input.index()].name, to);
        let out = self.new_tensor(name.clone());
        let kind = LayerKind::Cast(Cast { to });
        let types = self.infer(&name, &kind, &[input])?;
        self.emit(
            Layer {
                name,
                kind,
                inputs: vec![input],
                outputs: vec![out],
            },
            types,
            device,
        );
        Ok(out)
    }
}

/// Builds an engine for `config.device` with the given backends (a CPU backend is also used
/// to fold constants).
pub fn build(
    network: &NetworkDefinition,
    config: &BuildConfig,
    backends: &[Arc<dyn Backend>],
) -> Result<Engine> {
    if !matches!(config.precision, DType::F32 | DType::F16 | DType::BF16) {
        return Err(Error::InvalidArgument(format!(
            "precision must be f32, f16 or bf16, got {}",
            config.precision
        )));
    }
    let backend = backends
        .iter()
        .find(|b| b.device() == config.device)
        .cloned()
        .ok_or_else(|| {
            Error::InvalidArgument(format!("no {} backend is available", config.device))
        })?;
    if network.outputs().is_empty() {
        return Err(Error::Network("the network has no outputs".into()));
    }
    let cpu = backends
        .iter()
        .find(|b| b.device() == DeviceKind::Cpu)
        .cloned();
    let live = live_layers(network);
    let uses = use_counts(network, &live);
    let mut work = Work {
        tensors: (0..network.num_tensors())
            .map(|i| TensorInfo {
                name: network.tensor_name(TensorId(i as u32)).to_string(),
                ..TensorInfo::default()
            })
            .collect(),
        layers: Vec::new(),
        devices: Vec::new(),
        reformats: HashSet::new(),
        opt: tactics::optimum(network.inputs()),
    };
    let timing = tactics::Timing { backends, config };
    let mut remap: Vec<TensorId> = (0..network.num_tensors() as u32).map(TensorId).collect();
    let reduced = config.precision != DType::F32;
    let mut demoted = HashSet::new();
    for input in network.inputs() {
        work.tensors[input.tensor.index()].ty = Some(TypeShape::new(input.dtype, input.shape()));
        if reduced && input.dtype == DType::F32 {
            let cast = work.emit_cast(input.tensor, config.precision, config.device)?;
            remap[input.tensor.index()] = cast;
            demoted.insert(cast);
        }
    }
    for (layer, _) in network.layers().iter().zip(&live).filter(|(_, l)| **l) {
        let mut inputs: Vec<TensorId> = layer.inputs.iter().map(|t| remap[t.index()]).collect();
        let mut kind = layer.kind.clone();
        if reduced {
            reduce_precision(&mut kind, config.precision).map_err(|message| Error::Layer {
                layer: layer.name.clone(),
                kind: layer.kind.op().kind(),
                message,
            })?;
        }
        let mut device = config.device;
        if let LayerKind::Plugin(p) = &mut kind {
            device = negotiate::plugin_inputs(&mut work, &layer.name, p, &mut inputs, config)?;
        }
        let types = work.infer(&layer.name, &kind, &inputs)?;
        if reduced && computes_in_f32(layer, &inputs, &demoted) {
            let reduced_outputs = layer.outputs.iter().zip(&types);
            demoted.extend(
                reduced_outputs
                    .filter(|(_, ty)| ty.dtype == config.precision)
                    .map(|(&t, _)| t),
            );
        }
        if let LayerKind::Plugin(p) = &mut kind {
            negotiate::configure(&work, &layer.name, p, &inputs, &types, device)?;
            tactics::choose(&work, &layer.name, p, &inputs, &types, device, &timing)?;
        }
        let step = passes::Step {
            layer,
            kind: &kind,
            inputs: &inputs,
            types: &types,
            uses: &uses,
            device,
            cpu: cpu.as_deref(),
            config,
        };
        if passes::run_layer_passes(&mut work, &step)? {
            continue;
        }
        work.emit(
            Layer {
                name: layer.name.clone(),
                kind,
                inputs,
                outputs: layer.outputs.clone(),
            },
            types,
            device,
        );
    }
    let mut outputs = Vec::new();
    for (name, t) in network.outputs() {
        let mut t = remap[t.index()];
        let dtype = work.ty(t).dtype;
        if reduced && dtype == config.precision && demoted.contains(&t) {
            t = work.emit_cast(t, DType::F32, config.device)?;
        }
        outputs.push((name.clone(), t));
    }
    passes::run_graph_passes(&mut work, &outputs, config, backend.as_ref());
    let inputs: Vec<NetworkInput> = network.inputs().to_vec();
    let plan = compact(work, inputs, outputs, config, &backend)?;
    Engine::from_plan(plan, backend, Vec::new())
}

/// How many live layers (and outputs) read each tensor.
fn use_counts(network: &NetworkDefinition, live: &[bool]) -> Vec<usize> {
    let mut uses = vec![0; network.num_tensors()];
    for (layer, _) in network.layers().iter().zip(live).filter(|(_, l)| **l) {
        for t in &layer.inputs {
            uses[t.index()] += 1;
        }
    }
    for (_, t) in network.outputs() {
        uses[t.index()] += 1;
    }
    uses
}

/// Marks the layers some output depends on.
fn live_layers(network: &NetworkDefinition) -> Vec<bool> {
    let outputs: Vec<TensorId> = network.outputs().iter().map(|(_, t)| *t).collect();
    live(network.layers(), network.num_tensors(), &outputs)
}

/// Marks the layers of `work` some output depends on.
pub(super) fn live_work_layers(work: &Work, outputs: &[(String, TensorId)]) -> Vec<bool> {
    let outputs: Vec<TensorId> = outputs.iter().map(|(_, t)| *t).collect();
    live(&work.layers, work.tensors.len(), &outputs)
}

/// Marks the layers (over `tensors` tensors) that `outputs` depend on, walking back.
fn live(layers: &[Layer], tensors: usize, outputs: &[TensorId]) -> Vec<bool> {
    let mut needed = vec![false; tensors];
    for t in outputs {
        needed[t.index()] = true;
    }
    let mut live = vec![false; layers.len()];
    for (i, layer) in layers.iter().enumerate().rev() {
        if layer.outputs.iter().any(|t| needed[t.index()]) {
            live[i] = true;
            for t in &layer.inputs {
                needed[t.index()] = true;
            }
        }
    }
    live
}

/// Drops layers folding left unused, renumbers tensors densely, and plans memory.
fn compact(
    work: Work,
    inputs: Vec<NetworkInput>,
    outputs: Vec<(String, TensorId)>,
    config: &BuildConfig,
    backend: &Arc<dyn Backend>,
) -> Result<EnginePlan> {
    let keep = live_work_layers(&work, &outputs);
    let mut new_id: Vec<Option<TensorId>> = vec![None; work.tensors.len()];
    let mut names = Vec::new();
    let mut dtypes = Vec::new();
    let mut assign = |t: TensorId, new_id: &mut Vec<Option<TensorId>>| -> TensorId {
        *new_id[t.index()].get_or_insert_with(|| {
            names.push(work.tensors[t.index()].name.clone());
            dtypes.push(work.ty(t).dtype);
            TensorId(names.len() as u32 - 1)
        })
    };
    let inputs: Vec<NetworkInput> = inputs
        .into_iter()
        .map(|mut i| {
            i.tensor = assign(i.tensor, &mut new_id);
            i
        })
        .collect();
    let mut layers = Vec::new();
    let mut devices = Vec::new();
    let mut reformats = Vec::new();
    for ((layer, device), _) in work
        .layers
        .iter()
        .zip(&work.devices)
        .zip(&keep)
        .filter(|(_, k)| **k)
    {
        let mut l = layer.clone();
        l.inputs = l.inputs.iter().map(|&t| assign(t, &mut new_id)).collect();
        l.outputs = l.outputs.iter().map(|&t| assign(t, &mut new_id)).collect();
        if work.reformats.contains(&l.name) {
            reformats.push(l.name.clone());
        }
        layers.push(l);
        devices.push(*device);
    }
    let outputs: Vec<(String, TensorId)> = outputs
        .into_iter()
        .map(|(n, t)| (n, assign(t, &mut new_id)))
        .collect();
    let mut plan = EnginePlan {
        target: Target::for_backend(backend.as_ref()),
        precision: config.precision,
        inputs,
        outputs,
        tensor_names: names,
        tensor_dtypes: dtypes,
        layers,
        devices,
        reformats,
        memory: MemoryPlan::default(),
        options: PrepareOptions { tf32: config.tf32 },
    };
    plan.memory = memory::plan(
        &plan,
        &crate::engine::infer_plan(&plan)?,
        config.memory_limit(),
    )?;
    Ok(plan)
}

/// Whether `layer` computes in f32 in the network as defined, so that its outputs in the
/// reduced precision stand for f32 values: constants and fills of f32, casts to f32, and
/// layers reading a tensor that does (`demoted`), except casts to other types, whose target
/// is what the network asked for. Only such outputs are cast back to f32 when marked as
/// network outputs; an output the network declares in f16 stays f16.
fn computes_in_f32(layer: &Layer, inputs: &[TensorId], demoted: &HashSet<TensorId>) -> bool {
    match &layer.kind {
        LayerKind::Cast(c) => c.to == DType::F32,
        LayerKind::Constant(c) => c.value.dtype() == DType::F32,
        LayerKind::ConstantOfShape(c) => c.dtype == DType::F32,
        _ => inputs.iter().any(|t| demoted.contains(t)),
    }
}

/// Converts the f32 values a layer produces by itself (constants, fills, casts) to
/// `precision`: a cast to f32 (of a shape's integers, say, scaling an f32 tensor) would
/// otherwise meet the reduced tensors it was meant to match.
fn reduce_precision(kind: &mut LayerKind, precision: DType) -> Result<(), String> {
    match kind {
        LayerKind::Cast(c) if c.to == DType::F32 => c.to = precision,
        LayerKind::Constant(c) if c.value.dtype() == DType::F32 => {
            *c = Constant::new(convert_f32(&c.value, precision).map_err(|e| e.to_string())?);
        }
        LayerKind::ConstantOfShape(c) if c.dtype == DType::F32 => {
            let value = convert_f32(&c.value_tensor()?, precision).map_err(|e| e.to_string())?;
            *c = ConstantOfShape::from_tensor(&value)?;
        }
        _ => {}
    }
    Ok(())
}

/// Converts an f32 tensor to f16 or bf16.
pub(crate) fn convert_f32(t: &Tensor, to: DType) -> Result<Tensor> {
    let v = t.as_slice::<f32>()?;
    match to {
        DType::F16 => Tensor::from_vec(
            t.shape(),
            v.iter().map(|&x| half::f16::from_f32(x)).collect(),
        ),
        DType::BF16 => Tensor::from_vec(
            t.shape(),
            v.iter().map(|&x| half::bf16::from_f32(x)).collect(),
        ),
        _ => Ok(t.clone()),
    }
}
