//! The one walk over an engine's plan, for every backend.
//!
//! Every layer's output shapes are inferred from its inputs' shapes (and, for shape
//! tensors, their values); tensors are released after their last use; constants and layers
//! derived from constants alone are computed once per context. Each tensor lives on the
//! host, on the device or both: [`Placement::Device`] kernels run on the context's device
//! over device memory, host kernels over host memory, and a tensor is copied across only
//! when a layer on the other side reads it. Shape-only layers (`Shape`, `Size`) and small
//! integer layers whose inputs are on the host stay on the host, so shape arithmetic never
//! waits for the device.
//!
//! Repeated runs at the same input shapes allocate nothing: values keep their storage in the
//! context, activations come back from pools, and the output shapes of every layer whose
//! shapes follow from the input shapes alone are kept per input-shape key ([`ShapePlans`]),
//! with the values of small shape arithmetic.

use std::sync::Arc;
use std::time::Instant;

use torchtrt_plugin_api::{DType, DeviceTensor};

use super::dims::concrete_dims;
use super::io::{OutputTarget, RunInputs};
use super::plans::ShapePlans;
use super::value::{Dev, DevTable, Host, HostPool, Known, Meta, Value, device_tensor};
use crate::backend::{DeviceContext, DeviceMemory, Kernel, Placement};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::layers::{InferInput, LayerKind};
use crate::network::{Layer, TensorId};
use crate::runtime::LayerTiming;
use crate::tensor::{Tensor, shape_i64};

/// Integer tensors up to this many elements are shape arithmetic: downloaded when shape
/// inference needs their values, and kept on the host by small integer layers.
pub(crate) const SHAPE_TENSOR_ELEMENTS: usize = 1 << 16;

/// A context's state between runs.
pub(crate) struct Walk {
    pub engine: Engine,
    pub device: Option<Box<dyn DeviceContext>>,
    pub slots: Vec<Value>,
    pub pool: HostPool,
    pub devs: DevTable,
    /// Per layer: its outputs follow from constants alone.
    derived: Vec<bool>,
    /// Per layer: a derived layer's outputs are kept (computed on a first run).
    derived_done: Vec<bool>,
    /// Per tensor: kept host and device copies of derived tensors, with their shapes.
    keep_host: Vec<Option<Arc<Tensor>>>,
    keep_dev: Vec<Option<DeviceMemory>>,
    keep_shape: Vec<Vec<usize>>,
    /// Per tensor: an output of a constant or derived layer (its device copy is kept).
    is_kept: Vec<bool>,
    /// Per tensor, this run: its value follows from the input shapes alone.
    keyed: Vec<bool>,
    /// Per tensor, this run: its shape depends on values that do not follow from the input
    /// shapes (an input's values, a value read back from the device).
    value_shaped: Vec<bool>,
    pub plans: ShapePlans,
    /// A run is being recorded: steps that wait for the device or copy host memory fail.
    pub capturing: bool,
    pub profile: Option<Vec<LayerTiming>>,
    /// Where a recorded run leaves each output, with the memory it holds there.
    pub kept_outputs: Vec<(u64, DType, Vec<usize>, Option<DeviceMemory>)>,
    outs: Vec<Tensor>,
    dims: Vec<Meta>,
    /// Per tensor: its shape depends on a length a kernel decides (an output sized by a
    /// count, the count itself, or anything computed from them).
    data_dependent: Vec<bool>,
    /// Each engine output's shape in the last run that reached the end.
    pub last_shapes: Vec<Vec<usize>>,
}

/// Per tensor of `plan`: whether its shape depends on a length a kernel decides.
pub(crate) fn data_dependent(plan: &crate::engine::EnginePlan) -> Vec<bool> {
    let mut flag = vec![false; plan.tensor_names.len()];
    for layer in &plan.layers {
        let op = layer.kind.op();
        let from_inputs = layer.inputs.iter().any(|t| flag[t.index()]);
        for (o, t) in layer.outputs.iter().enumerate() {
            let sized = op
                .sized_outputs()
                .iter()
                .any(|s| s.output == o || s.count == o);
            flag[t.index()] |= from_inputs || sized;
        }
    }
    flag
}

/// Whether outputs are small enough to compute on the host next to host inputs.
pub(crate) fn small(dims: &[Meta]) -> bool {
    dims.iter()
        .all(|(_, s)| s.iter().product::<usize>() <= SHAPE_TENSOR_ELEMENTS)
}

fn exec_error(layer: &str) -> impl Fn(String) -> Error + '_ {
    move |message| Error::Execution {
        layer: layer.to_string(),
        message,
    }
}

/// The shared empty tensor that pads reference arrays.
fn placeholder() -> &'static Tensor {
    static EMPTY: std::sync::OnceLock<Tensor> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Tensor::default)
}

/// Calls `f` with the host tensors `get` gives for `0..n`, gathered without allocating
/// for up to 16.
fn with_refs<'t, R>(
    n: usize,
    get: impl Fn(usize) -> &'t Tensor,
    f: impl FnOnce(&[&Tensor]) -> R,
) -> R {
    if n <= 16 {
        let mut refs: [&Tensor; 16] = [placeholder(); 16];
        for (i, r) in refs.iter_mut().enumerate().take(n) {
            *r = get(i);
        }
        f(&refs[..n])
    } else {
        let refs: Vec<&Tensor> = (0..n).map(get).collect();
        f(&refs)
    }
}

impl Walk {
    pub(crate) fn new(engine: Engine, device: Option<Box<dyn DeviceContext>>) -> Walk {
        let plan = engine.plan();
        let n = plan.tensor_names.len();
        let derived = plan.constant_derived();
        let mut is_kept = vec![false; n];
        for (li, layer) in plan.layers.iter().enumerate() {
            if derived[li] || matches!(layer.kind, LayerKind::Constant(_)) {
                for t in &layer.outputs {
                    is_kept[t.index()] = true;
                }
            }
        }
        let data_dependent = data_dependent(plan);
        let last_shapes = vec![Vec::new(); plan.outputs.len()];
        Walk {
            data_dependent,
            last_shapes,
            slots: (0..n).map(|_| Value::empty()).collect(),
            derived_done: vec![false; plan.layers.len()],
            derived,
            keep_host: vec![None; n],
            keep_dev: vec![None; n],
            keep_shape: vec![Vec::new(); n],
            is_kept,
            keyed: vec![false; n],
            value_shaped: vec![false; n],
            plans: ShapePlans::default(),
            engine,
            device,
            pool: HostPool::default(),
            devs: DevTable::default(),
            capturing: false,
            profile: None,
            kept_outputs: Vec::new(),
            outs: Vec::new(),
            dims: Vec::new(),
        }
    }

    /// Walks the plan over `inputs`, leaving each output as `targets` asks; on error nothing
    /// stays live. The caller has checked the inputs against the engine.
    /// Whether some tensor's shape depends on a length a kernel decides (such runs read a
    /// count back from the device, so they are never recorded into a graph).
    pub(crate) fn has_data_dependent(&self) -> bool {
        self.data_dependent.iter().any(|&d| d)
    }

    pub(crate) fn run(
        &mut self,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        if let Some(d) = self.device.as_mut() {
            d.begin_run().map_err(exec_error("run"))?;
        }
        let engine = self.engine.clone();
        let plan = engine.plan();
        self.plans.select(plan, inputs);
        for (k, spec) in plan.inputs.iter().enumerate() {
            let (dtype, shape) = inputs.meta(k);
            let v = &mut self.slots[spec.tensor.index()];
            v.reset(dtype, shape);
            match (inputs.host(k), inputs.device(k)) {
                (Some(_), _) => v.host = Host::Input(k),
                (None, Some(ptr)) => v.dev = Dev::External(ptr),
                (None, None) => {}
            }
        }
        self.keyed.iter_mut().for_each(|k| *k = false);
        self.value_shaped.iter_mut().for_each(|k| *k = false);
        let mut result = Ok(());
        for li in 0..plan.layers.len() {
            result = self.layer(li, inputs, targets);
            if result.is_err() {
                break;
            }
        }
        let result = result.and_then(|()| self.finish(inputs, targets));
        self.release_all();
        if let Some(d) = self.device.as_mut() {
            d.end_run();
        }
        result
    }

    /// Leaves each engine output as its target asks: moved or copied into a tensor for the
    /// caller, copied into a bound buffer it was not computed in, or left in place.
    fn finish(
        &mut self,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        let engine = self.engine.clone();
        let plan = engine.plan();
        for (k, (name, t)) in plan.outputs.iter().enumerate() {
            let i = t.index();
            if !self.slots[i].live {
                return Err(Error::Execution {
                    layer: name.clone(),
                    message: "output was not computed".into(),
                });
            }
            let err = exec_error(name);
            self.last_shapes[k].clone_from(&self.slots[i].shape);
            match &targets[k] {
                OutputTarget::Keep => {
                    let v = &self.slots[i];
                    let (dtype, shape) = (v.dtype, v.shape.clone());
                    let (ptr, memory) = match v.dev {
                        Dev::None => {
                            return Err(err("it is computed on the host only".into()));
                        }
                        Dev::Run { index, offset } => {
                            (self.devs.ptr(index, offset), self.devs.detach(index))
                        }
                        Dev::Kept(p) | Dev::External(p) => (p, None),
                    };
                    self.kept_outputs.push((ptr, dtype, shape, memory));
                }
                OutputTarget::Return(_) => {
                    let later = plan.outputs[k + 1..].iter().any(|(_, u)| u == t);
                    let value = self.output_tensor(i, later, inputs, targets)?;
                    targets[k] = OutputTarget::Return(Some(value));
                }
                OutputTarget::Host { .. } => {
                    if matches!(self.slots[i].host, Host::Bound(b) if b == k) {
                        continue;
                    }
                    let v = &self.slots[i];
                    if let Some((d, s)) = targets[k].meta()
                        && !self.fits(i, d, s)
                    {
                        return Err(output_mismatch(plan, k, v.dtype, &v.shape, d, s));
                    }
                    let OutputTarget::Host { tensor, .. } = &mut targets[k] else {
                        unreachable!("matched above")
                    };
                    let Some(mut dst) = tensor.take() else {
                        continue;
                    };
                    let n = self.slots[i].bytes();
                    let copied = match Self::host(&self.slots, inputs, targets, i) {
                        Some(h) => {
                            dst.bytes_mut()[..n].copy_from_slice(h.bytes());
                            Ok(())
                        }
                        None => {
                            let p = self
                                .dev_ptr(i)
                                .unwrap_or_else(|| unreachable!("a live value has a copy"));
                            let device = self.device.as_deref_mut().ok_or_else(no_device)?;
                            // SAFETY: the device copy holds the output's `n` bytes.
                            unsafe { device.download(p, &mut dst.bytes_mut()[..n]) }.map_err(&err)
                        }
                    };
                    if let OutputTarget::Host { tensor, .. } = &mut targets[k] {
                        *tensor = Some(dst);
                    }
                    copied?;
                }
                OutputTarget::Device { ptr, dtype, shape } => {
                    let (ptr, dtype, shape) = (*ptr, *dtype, shape.clone());
                    let v = &self.slots[i];
                    if !self.fits(i, dtype, &shape) {
                        return Err(output_mismatch(plan, k, v.dtype, &v.shape, dtype, &shape));
                    }
                    let bytes = v.bytes();
                    if v.dev == Dev::External(ptr) {
                        continue;
                    }
                    let src = self.dev_ptr(i);
                    let device = self.device.as_deref_mut().ok_or_else(no_device)?;
                    match src {
                        // SAFETY: both hold the output's bytes (checked dtype and shape).
                        Some(p) => unsafe { device.copy(p, ptr, bytes) }.map_err(&err)?,
                        None => {
                            let h = Self::host(&self.slots, inputs, targets, i)
                                .unwrap_or_else(|| unreachable!("a live value has a copy"));
                            // SAFETY: the caller's buffer holds the output's bytes.
                            unsafe { device.upload(h.bytes(), ptr) }.map_err(&err)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether a caller's buffer of `dtype` and `shape` takes output slot `i`: exactly its
    /// dtype and shape, or, for a data-dependent output, its dtype and room for its bytes
    /// (written at the buffer's start; [`Walk::last_shapes`] says the shape).
    fn fits(&self, i: usize, dtype: DType, shape: &[usize]) -> bool {
        let v = &self.slots[i];
        if dtype != v.dtype {
            return false;
        }
        if !self.data_dependent[i] {
            return shape == v.shape.as_slice();
        }
        shape
            .iter()
            .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
            .is_some_and(|room| room >= v.bytes())
    }

    /// Output slot `i` as a tensor of the caller's: the computed tensor itself when nothing
    /// else reads it (`later`: another output is the same tensor), else a copy.
    fn output_tensor(
        &mut self,
        i: usize,
        later: bool,
        inputs: &(impl RunInputs + ?Sized),
        targets: &[OutputTarget],
    ) -> Result<Tensor> {
        if !later
            && matches!(self.slots[i].host, Host::Owned(_))
            && let Host::Owned(t) = std::mem::replace(&mut self.slots[i].host, Host::None)
        {
            return Ok(t);
        }
        if let Some(h) = Self::host(&self.slots, inputs, targets, i) {
            return Ok(h.clone());
        }
        let ptr = self
            .dev_ptr(i)
            .unwrap_or_else(|| unreachable!("a live value has a copy"));
        let v = &self.slots[i];
        let mut t = Tensor::zeros(v.dtype, &v.shape);
        let name = &self.engine.plan().tensor_names[i];
        let device = self.device.as_deref_mut().ok_or_else(no_device)?;
        // SAFETY: the device copy holds the output's bytes.
        unsafe { device.download(ptr, t.bytes_mut()) }.map_err(exec_error(name))?;
        Ok(t)
    }

    /// Gives every live value's memory back and empties the slots.
    pub(crate) fn release_all(&mut self) {
        for i in 0..self.slots.len() {
            self.release(i);
        }
        if let Some(d) = self.device.as_deref_mut() {
            self.devs.clear(d);
        }
    }

    /// Empties slot `i`, giving its memory back.
    fn release(&mut self, i: usize) {
        let v = &mut self.slots[i];
        if !v.live {
            return;
        }
        v.live = false;
        if let Host::Owned(t) = std::mem::replace(&mut v.host, Host::None) {
            self.pool.put(t);
        }
        if let Dev::Run { index, .. } = std::mem::replace(&mut v.dev, Dev::None)
            && let Some(d) = self.device.as_deref_mut()
        {
            self.devs.drop_ref(d, index);
        }
    }

    fn layer(
        &mut self,
        li: usize,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        let engine = self.engine.clone();
        let plan = engine.plan();
        let layer = &plan.layers[li];
        if let LayerKind::Constant(c) = &layer.kind {
            let t = layer.outputs[0].index();
            let v = &mut self.slots[t];
            v.reset(c.value.dtype(), c.value.shape());
            v.host = Host::Shared(c.value.clone());
            v.dev = self.keep_dev[t].map_or(Dev::None, |m| Dev::Kept(m.ptr));
            self.keyed[t] = true;
            return Ok(());
        }
        if self.derived_done[li] {
            for t in &layer.outputs {
                let i = t.index();
                let v = &mut self.slots[i];
                let dtype = plan.tensor_dtypes[i];
                v.reset(dtype, &self.keep_shape[i]);
                v.host = self.keep_host[i].clone().map_or(Host::None, Host::Shared);
                v.dev = self.keep_dev[i].map_or(Dev::None, |m| Dev::Kept(m.ptr));
                self.keyed[i] = true;
            }
            return Ok(());
        }
        for t in &layer.inputs {
            if !self.slots[t.index()].live {
                return Err(Error::Execution {
                    layer: layer.name.clone(),
                    message: format!(
                        "input `{}` was released early",
                        plan.tensor_names[t.index()]
                    ),
                });
            }
        }
        let started = self.start_timer()?;
        self.compute(li, layer, inputs, targets)?;
        self.settle_sized(layer, inputs, targets)?;
        let keyed = self.derived[li]
            || (layer.kind.op().foldable() && layer.inputs.iter().all(|t| self.keyed[t.index()]));
        for t in &layer.outputs {
            self.keyed[t.index()] |= keyed;
        }
        self.stop_timer(li, started)?;
        if self.derived[li] {
            self.keep_derived(li, layer);
        } else {
            self.plans.keep_values(li, layer, &self.slots, &self.keyed);
        }
        for t in &plan.memory.release_after[li] {
            self.release(t.index());
        }
        Ok(())
    }

    /// Computes layer `li` (not a constant, not a kept derived layer) into its slots.
    fn compute(
        &mut self,
        li: usize,
        layer: &Layer,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        if let Some(values) = self.plans.values(li) {
            for (t, value) in layer.outputs.iter().zip(values) {
                let v = &mut self.slots[t.index()];
                v.reset(value.dtype(), value.shape());
                v.host = Host::Shared(value.clone());
                self.keyed[t.index()] = true;
            }
            return Ok(());
        }
        let dims_unknown = self.plans.dims(li).is_none();
        if let Some(values) = dims_unknown
            .then(|| self.eval_from_shapes(layer, inputs, targets))
            .flatten()
        {
            let from_key = !layer.inputs.iter().any(|t| self.value_shaped[t.index()]);
            for (t, value) in layer.outputs.iter().zip(values) {
                let v = &mut self.slots[t.index()];
                v.reset(value.dtype(), value.shape());
                v.host = Host::Owned(value);
                self.keyed[t.index()] = from_key;
                self.value_shaped[t.index()] = !from_key;
            }
            return Ok(());
        }
        self.output_dims(li, layer, inputs, targets)?;
        if self.try_view(li, layer) {
            return Ok(());
        }
        let engine = self.engine.clone();
        let kernel = engine.kernel(li).ok_or_else(|| Error::Execution {
            layer: layer.name.clone(),
            message: "no kernel was prepared".into(),
        })?;
        match kernel.placement() {
            Placement::Host => self.run_host(li, layer, kernel, inputs, targets),
            Placement::Device => {
                let all_on_host = layer
                    .inputs
                    .iter()
                    .all(|t| !matches!(self.slots[t.index()].host, Host::None));
                match kernel.host_twin() {
                    Some(host) if all_on_host && small(&self.dims) => {
                        self.run_host(li, layer, host, inputs, targets)
                    }
                    _ => {
                        if self.try_slice_view(layer) {
                            return Ok(());
                        }
                        self.run_device(li, layer, kernel, inputs, targets)
                    }
                }
            }
        }
    }

    /// The host copy of slot `i`, when it has one.
    fn host<'a>(
        slots: &'a [Value],
        inputs: &'a (impl RunInputs + ?Sized),
        targets: &'a [OutputTarget],
        i: usize,
    ) -> Option<&'a Tensor> {
        match &slots[i].host {
            Host::None => None,
            Host::Input(k) => inputs.host(*k),
            Host::Bound(k) => match &targets[*k] {
                OutputTarget::Host { tensor, .. } => tensor.as_ref(),
                _ => None,
            },
            Host::Shared(t) => Some(t),
            Host::Owned(t) => Some(t),
        }
    }

    /// The device address of slot `i`, when it has a device copy.
    fn dev_ptr(&self, i: usize) -> Option<u64> {
        match self.slots[i].dev {
            Dev::None => None,
            Dev::Run { index, offset } => Some(self.devs.ptr(index, offset)),
            Dev::Kept(p) | Dev::External(p) => Some(p),
        }
    }

    /// The outputs of a layer whose outputs follow from its inputs' shapes alone.
    fn eval_from_shapes(
        &self,
        layer: &Layer,
        inputs: &(impl RunInputs + ?Sized),
        targets: &[OutputTarget],
    ) -> Option<Vec<Tensor>> {
        if matches!(layer.kind, LayerKind::Plugin(_)) {
            return None;
        }
        let shapes: Vec<Vec<_>> = layer
            .inputs
            .iter()
            .map(|t| torchtrt_plugin_api::const_shape(&shape_i64(&self.slots[t.index()].shape)))
            .collect();
        let infer: Vec<InferInput<'_>> = layer
            .inputs
            .iter()
            .zip(&shapes)
            .map(|(t, s)| InferInput {
                dtype: self.slots[t.index()].dtype,
                shape: s,
                value: Self::host(&self.slots, inputs, targets, t.index()),
            })
            .collect();
        layer.kind.op().eval_from_shapes(&infer)
    }

    /// Infers layer `li`'s output dtypes and concrete shapes into `self.dims`; downloads
    /// small integer inputs when inference needs their values.
    fn output_dims(
        &mut self,
        li: usize,
        layer: &Layer,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        if let Some(dims) = self.plans.dims(li) {
            self.dims.truncate(dims.len());
            while self.dims.len() < dims.len() {
                self.dims.push((DType::F32, Vec::new()));
            }
            for ((dtype, shape), (d, s)) in self.dims.iter_mut().zip(dims) {
                *dtype = *d;
                shape.clear();
                shape.extend_from_slice(s);
            }
            return Ok(());
        }
        for &i in layer.kind.op().value_inputs() {
            if let Some(t) = layer.inputs.get(i) {
                self.fetch(t.index(), inputs, targets)?;
            }
        }
        let mut fetched = false;
        let dims = match self.infer_dims(layer, inputs, targets) {
            Ok(dims) => dims,
            Err(first) => {
                for t in &layer.inputs {
                    let v = &self.slots[t.index()];
                    if matches!(v.host, Host::None)
                        && matches!(v.dtype, DType::I64 | DType::I32)
                        && v.shape.iter().product::<usize>() <= SHAPE_TENSOR_ELEMENTS
                    {
                        self.fetch(t.index(), inputs, targets)?;
                        fetched = true;
                    }
                }
                if !fetched {
                    return Err(first);
                }
                self.infer_dims(layer, inputs, targets)?
            }
        };
        let keyed = !fetched
            && layer.kind.op().sized_outputs().is_empty()
            && !layer.inputs.iter().any(|t| self.value_shaped[t.index()])
            && layer
                .kind
                .op()
                .value_inputs()
                .iter()
                .filter_map(|&i| layer.inputs.get(i))
                .all(|t| self.keyed[t.index()]);
        if keyed {
            self.plans.keep_dims(li, &dims);
        }
        for t in &layer.outputs {
            self.value_shaped[t.index()] = !keyed;
        }
        self.dims = dims;
        Ok(())
    }

    fn infer_dims(
        &self,
        layer: &Layer,
        inputs: &(impl RunInputs + ?Sized),
        targets: &[OutputTarget],
    ) -> Result<Vec<Meta>> {
        let described: Vec<(DType, &[usize], Option<&Tensor>)> = layer
            .inputs
            .iter()
            .map(|t| {
                let v = &self.slots[t.index()];
                (
                    v.dtype,
                    v.shape.as_slice(),
                    Self::host(&self.slots, inputs, targets, t.index()),
                )
            })
            .collect();
        concrete_dims(layer, &described)
    }

    /// A view layer (Reshape, Flatten, Squeeze, Unsqueeze) whose output can share its
    /// input's memory: on the device it aliases the input's device copy; on the host it
    /// takes over the input's buffer when this layer is its last reader.
    fn try_view(&mut self, li: usize, layer: &Layer) -> bool {
        if !layer.kind.is_view() || self.dims.len() != 1 {
            return false;
        }
        let (dtype, ref shape) = self.dims[0];
        let x = layer.inputs[0].index();
        let out = layer.outputs[0].index();
        let same = self.slots[x].dtype == dtype
            && self.slots[x].shape.iter().product::<usize>() == shape.iter().product::<usize>();
        if !same || x == out {
            return false;
        }
        let dev = self.slots[x].dev;
        if dev != Dev::None {
            if let Dev::Run { index, .. } = dev {
                self.devs.share(index);
            }
            let v = &mut self.slots[out];
            v.reset(dtype, shape);
            v.dev = dev;
            return true;
        }
        let last_use = self.engine.plan().memory.release_after[li].contains(&layer.inputs[0]);
        if last_use && matches!(self.slots[x].host, Host::Owned(_)) {
            let Host::Owned(mut t) = std::mem::replace(&mut self.slots[x].host, Host::None) else {
                return false;
            };
            self.slots[x].live = false;
            t.reset(dtype, shape);
            let v = &mut self.slots[out];
            v.reset(dtype, shape);
            v.host = Host::Owned(t);
            return true;
        }
        false
    }

    /// A selection whose output is one contiguous block of its input, and is not an engine
    /// output, aliases the input's device memory at an offset instead of copying: a `Gather`
    /// of one constant index (a constant or a value kept across runs, so the same in every
    /// recorded replay) along an axis with only unit dims before it (how exported attention
    /// selects q, k, v), or a `Slice` of fixed parameters keeping one index of every axis
    /// before one axis, a step-1 range of it and all of every axis after it (a `Split` of a
    /// packed q, k, v along its outermost axis).
    fn try_slice_view(&mut self, layer: &Layer) -> bool {
        let plan = self.engine.plan();
        if self.dims.len() != 1 || plan.outputs.iter().any(|(_, t)| *t == layer.outputs[0]) {
            return false;
        }
        let (dtype, ref shape) = self.dims[0];
        let start = match &layer.kind {
            LayerKind::Gather(_) => self.gathered_block(layer),
            LayerKind::Slice(s) if layer.inputs.len() == 1 => {
                sliced_block(s, &self.slots[layer.inputs[0].index()].shape)
            }
            _ => None,
        };
        let Some(start) = start else {
            return false;
        };
        let x = &self.slots[layer.inputs[0].index()];
        let fits = dtype == x.dtype
            && start + shape.iter().product::<usize>() <= x.shape.iter().product::<usize>();
        let offset = start * x.dtype.size();
        let dev = match x.dev {
            Dev::Run { index, offset: o } if fits => {
                self.devs.share(index);
                Dev::Run {
                    index,
                    offset: o + offset,
                }
            }
            Dev::Kept(p) if fits => Dev::Kept(p + offset as u64),
            Dev::External(p) if fits => Dev::External(p + offset as u64),
            _ => return false,
        };
        let v = &mut self.slots[layer.outputs[0].index()];
        v.reset(dtype, shape);
        v.dev = dev;
        true
    }

    /// The element where a `Gather`'s output starts in its input, when that output is one
    /// contiguous block of it (see [`Self::try_slice_view`]).
    fn gathered_block(&self, layer: &Layer) -> Option<usize> {
        let LayerKind::Gather(g) = &layer.kind else {
            return None;
        };
        let x = &self.slots[layer.inputs[0].index()];
        let Host::Shared(index) = &self.slots[layer.inputs.get(1)?.index()].host else {
            return None;
        };
        let [i] = index.to_i64_vec()?[..] else {
            return None;
        };
        let rank = x.shape.len() as i64;
        let axis = usize::try_from(if g.axis < 0 { g.axis + rank } else { g.axis }).ok()?;
        let len = *x.shape.get(axis)?;
        let i = usize::try_from(if i < 0 { i + len as i64 } else { i }).ok()?;
        let inner: usize = x.shape[axis + 1..].iter().product();
        let fits = i < len
            && x.shape[..axis].iter().all(|&d| d == 1)
            && self.dims[0].1.iter().product::<usize>() == inner;
        fits.then_some(i * inner)
    }

    /// Where layer output `t` must be written in place: the engine output it is, when that
    /// output is bound, unless the layer's outputs are kept across runs.
    fn bound_output(&self, li: usize, t: TensorId) -> Option<usize> {
        if self.derived[li] || self.capturing {
            return None;
        }
        if self.data_dependent[t.index()] {
            return None;
        }
        self.engine.plan().outputs.iter().position(|(_, o)| *o == t)
    }

    fn run_host(
        &mut self,
        li: usize,
        layer: &Layer,
        kernel: &dyn Kernel,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        for t in &layer.inputs {
            self.fetch(t.index(), inputs, targets)?;
        }
        let name = layer.name.as_str();
        let mut outs = std::mem::take(&mut self.outs);
        outs.clear();
        let mut lent = [usize::MAX; 8];
        for (o, (t, (dtype, shape))) in layer.outputs.iter().zip(&self.dims).enumerate() {
            let target = self.bound_output(li, *t).filter(|_| o < lent.len());
            let bound = match target.map(|k| (k, &mut targets[k])) {
                Some((k, OutputTarget::Host { tensor, .. })) => {
                    check_output(self.engine.plan(), k, *dtype, shape, tensor.as_ref())?;
                    tensor.take().map(|t| (k, t))
                }
                _ => None,
            };
            match bound {
                Some((k, t)) => {
                    lent[o] = k;
                    outs.push(t);
                }
                None => match self.pool.take(*dtype, shape) {
                    Ok(t) => outs.push(t),
                    Err(message) => {
                        for (o, out) in outs.drain(..).enumerate() {
                            match lent.get(o).copied().unwrap_or(usize::MAX) {
                                usize::MAX => self.pool.put(out),
                                k => {
                                    if let OutputTarget::Host { tensor, .. } = &mut targets[k] {
                                        *tensor = Some(out);
                                    }
                                }
                            }
                        }
                        self.outs = outs;
                        return Err(Error::Execution {
                            layer: layer.name.clone(),
                            message: format!(
                                "output `{}`: {message}",
                                self.engine.plan().tensor_names[t.index()]
                            ),
                        });
                    }
                },
            }
        }
        let slots = &self.slots;
        let ran = with_refs(
            layer.inputs.len(),
            |i| {
                Self::host(slots, inputs, targets, layer.inputs[i].index())
                    .unwrap_or_else(|| unreachable!("fetched above"))
            },
            |refs| kernel.execute(refs, &mut outs),
        );
        for (o, (t, out)) in layer.outputs.iter().zip(outs.drain(..)).enumerate() {
            let v = &mut self.slots[t.index()];
            v.reset(out.dtype(), out.shape());
            let k = lent.get(o).copied().unwrap_or(usize::MAX);
            if k != usize::MAX {
                if let OutputTarget::Host { tensor, .. } = &mut targets[k] {
                    *tensor = Some(out);
                }
                v.host = Host::Bound(k);
            } else {
                v.host = Host::Owned(out);
            }
        }
        self.outs = outs;
        ran.map_err(exec_error(name))
    }

    fn run_device(
        &mut self,
        li: usize,
        layer: &Layer,
        kernel: &dyn Kernel,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        let name = layer.name.as_str();
        for t in &layer.inputs {
            self.place(t.index(), inputs, targets)?;
        }
        let value_inputs = layer.kind.op().value_inputs();
        for &k in value_inputs {
            if let Some(t) = layer.inputs.get(k) {
                self.fetch(t.index(), inputs, targets)?;
            }
        }
        let ins: Vec<DeviceTensor> = layer
            .inputs
            .iter()
            .map(|t| {
                let ptr = self
                    .dev_ptr(t.index())
                    .unwrap_or_else(|| unreachable!("placed"));
                device_tensor(&self.slots[t.index()], ptr)
            })
            .collect();
        let mut outs = Vec::with_capacity(layer.outputs.len());
        let mut failed = None;
        for (t, (dtype, shape)) in layer.outputs.iter().zip(&self.dims) {
            let dev = match self.bound_output(li, *t).map(|k| (k, &targets[k])) {
                Some((k, OutputTarget::Device { ptr, .. })) => {
                    let want = targets[k].meta();
                    if let Some((d, s)) = want
                        && (d != *dtype || s != shape.as_slice())
                    {
                        failed = Some(output_mismatch(self.engine.plan(), k, *dtype, shape, d, s));
                        break;
                    }
                    Dev::External(*ptr)
                }
                _ => {
                    let bytes = shape.iter().product::<usize>() * dtype.size();
                    let device = self.device.as_deref_mut().ok_or_else(no_device)?;
                    match self.devs.alloc(device, bytes) {
                        Ok(index) => Dev::Run { index, offset: 0 },
                        Err(e) => {
                            failed = Some(Error::Execution {
                                layer: name.to_string(),
                                message: e,
                            });
                            break;
                        }
                    }
                }
            };
            let v = &mut self.slots[t.index()];
            v.reset(*dtype, shape);
            v.dev = dev;
            let ptr = self.dev_ptr(t.index()).unwrap_or(0);
            outs.push(device_tensor(&self.slots[t.index()], ptr));
        }
        let ran = match failed {
            Some(e) => Err(e),
            None => {
                let device = self.device.as_deref_mut().ok_or_else(no_device)?;
                if value_inputs.is_empty() {
                    kernel.enqueue(&ins, &outs, device)
                } else {
                    let values: Vec<Option<&Tensor>> = layer
                        .inputs
                        .iter()
                        .enumerate()
                        .map(|(k, t)| {
                            value_inputs
                                .contains(&k)
                                .then(|| Self::host(&self.slots, inputs, targets, t.index()))
                                .flatten()
                        })
                        .collect();
                    kernel.enqueue_with_values(&ins, &values, &outs, device)
                }
                .map_err(exec_error(name))
            }
        };
        if ran.is_err() {
            for t in &layer.outputs {
                self.release(t.index());
            }
        }
        ran
    }

    /// Shrinks each output of `layer` that a count sizes ([`LayerOp::sized_outputs`]) from
    /// the upper bound it was allocated at to the count the kernel wrote: reads the count
    /// (downloading it waits for the device, so such layers are never recorded into a
    /// graph) and refuses one outside `0..=` the bound.
    ///
    /// [`LayerOp::sized_outputs`]: crate::layers::LayerOp::sized_outputs
    fn settle_sized(
        &mut self,
        layer: &Layer,
        inputs: &(impl RunInputs + ?Sized),
        targets: &[OutputTarget],
    ) -> Result<()> {
        for s in layer.kind.op().sized_outputs() {
            let err = |message: String| Error::Execution {
                layer: layer.name.clone(),
                message,
            };
            let (Some(out), Some(count)) =
                (layer.outputs.get(s.output), layer.outputs.get(s.count))
            else {
                return Err(err(format!("sized output {s:?} names a missing output")));
            };
            self.fetch(count.index(), inputs, targets)?;
            let count = Self::host(&self.slots, inputs, targets, count.index())
                .and_then(|t| match t.as_slice::<i64>() {
                    Ok(&[c]) => Some(c),
                    _ => None,
                })
                .ok_or_else(|| err(format!("output {} is not a scalar i64 count", s.count)))?;
            let v = &mut self.slots[out.index()];
            let upper = v.shape.get(s.axis).copied().unwrap_or(0);
            if count < 0 || count as usize > upper {
                return Err(err(format!(
                    "the kernel's count {count} for axis {} of output {} is outside 0..={upper}",
                    s.axis, s.output
                )));
            }
            v.shape[s.axis] = count as usize;
            if let Host::Owned(t) = &mut v.host {
                t.reset(v.dtype, &v.shape);
            }
        }
        Ok(())
    }

    /// Makes the host copy of slot `i` exist: downloads it, waiting for the device.
    fn fetch(
        &mut self,
        i: usize,
        inputs: &(impl RunInputs + ?Sized),
        targets: &[OutputTarget],
    ) -> Result<()> {
        if Self::host(&self.slots, inputs, targets, i).is_some() {
            return Ok(());
        }
        let name = &self.engine.plan().tensor_names[i];
        self.refuse_in_capture("a download", name)?;
        let ptr = self.dev_ptr(i).ok_or_else(|| Error::Execution {
            layer: name.clone(),
            message: "tensor has neither a host nor a device copy".into(),
        })?;
        let v = &self.slots[i];
        let mut t = self
            .pool
            .take(v.dtype, &v.shape)
            .map_err(exec_error(name))?;
        let device = self.device.as_deref_mut().ok_or_else(no_device)?;
        // SAFETY: the device copy holds the tensor's bytes.
        unsafe { device.download(ptr, t.bytes_mut()) }.map_err(exec_error(name))?;
        self.slots[i].host = Host::Owned(t);
        Ok(())
    }

    /// Makes the device copy of slot `i` exist: uploads it (kept tensors once per context,
    /// into memory of their own).
    fn place(
        &mut self,
        i: usize,
        inputs: &(impl RunInputs + ?Sized),
        targets: &[OutputTarget],
    ) -> Result<()> {
        if self.slots[i].dev != Dev::None {
            return Ok(());
        }
        let name = &self.engine.plan().tensor_names[i];
        self.refuse_in_capture("an upload", name)?;
        let host = Self::host(&self.slots, inputs, targets, i).ok_or_else(|| Error::Execution {
            layer: name.clone(),
            message: "tensor has neither a host nor a device copy".into(),
        })?;
        let device = self.device.as_deref_mut().ok_or_else(no_device)?;
        let (dev, ptr) = if self.is_kept[i] {
            let m = device.alloc(host.bytes().len()).map_err(exec_error(name))?;
            self.keep_dev[i] = Some(m);
            (Dev::Kept(m.ptr), m.ptr)
        } else {
            let index = self
                .devs
                .alloc(device, host.bytes().len())
                .map_err(exec_error(name))?;
            (Dev::Run { index, offset: 0 }, self.devs.ptr(index, 0))
        };
        // SAFETY: the memory was just allocated with the tensor's size.
        unsafe { device.upload(host.bytes(), ptr) }.map_err(exec_error(name))?;
        self.slots[i].dev = dev;
        Ok(())
    }

    /// The dtype, shape and host value of each output of layer `li` when it is a derived
    /// layer whose outputs are kept.
    pub(crate) fn kept(&self, li: usize) -> Option<Vec<Known>> {
        if !self.derived_done[li] {
            return None;
        }
        let plan = self.engine.plan();
        Some(
            plan.layers[li]
                .outputs
                .iter()
                .map(|t| {
                    let i = t.index();
                    (
                        plan.tensor_dtypes[i],
                        self.keep_shape[i].clone(),
                        self.keep_host[i].clone(),
                    )
                })
                .collect(),
        )
    }

    /// Keeps a derived layer's outputs (host and device copies) for later runs.
    fn keep_derived(&mut self, li: usize, layer: &Layer) {
        self.derived_done[li] = true;
        for t in &layer.outputs {
            let i = t.index();
            let v = &mut self.slots[i];
            if let Host::Owned(h) = std::mem::replace(&mut v.host, Host::None) {
                v.host = Host::Shared(Arc::new(h));
            }
            if let Host::Shared(h) = &v.host {
                self.keep_host[i] = Some(h.clone());
            }
            if let Dev::Run { index, offset } = v.dev
                && let Some(m) = self.devs.detach(index)
            {
                self.keep_dev[i] = Some(m);
                v.dev = Dev::Kept(m.ptr + offset as u64);
            }
            self.keep_shape[i].clone_from(&v.shape);
        }
    }

    fn refuse_in_capture(&self, what: &str, name: &str) -> Result<()> {
        if self.capturing {
            return Err(Error::Execution {
                layer: name.to_string(),
                message: format!("{what} cannot be recorded"),
            });
        }
        Ok(())
    }

    fn start_timer(&mut self) -> Result<Option<Instant>> {
        if self.profile.is_none() {
            return Ok(None);
        }
        if let Some(d) = self.device.as_mut() {
            d.synchronize().map_err(exec_error("profiling"))?;
        }
        Ok(Some(Instant::now()))
    }

    fn stop_timer(&mut self, li: usize, started: Option<Instant>) -> Result<()> {
        let Some(t0) = started else {
            return Ok(());
        };
        if let Some(d) = self.device.as_mut() {
            d.synchronize().map_err(exec_error("profiling"))?;
        }
        if let Some(p) = self.profile.as_mut() {
            p[li].calls += 1;
            p[li].total += t0.elapsed();
        }
        Ok(())
    }
}

fn no_device() -> Error {
    Error::Execution {
        layer: "run".into(),
        message: "a layer runs on a device but the context has none".into(),
    }
}

fn output_mismatch(
    plan: &crate::engine::EnginePlan,
    k: usize,
    dtype: DType,
    shape: &[usize],
    bound_dtype: DType,
    bound_shape: &[usize],
) -> Error {
    Error::Input(format!(
        "output `{}` is {dtype}{shape:?}, its buffer is bound as {bound_dtype}{bound_shape:?}",
        plan.outputs[k].0
    ))
}

/// Checks that a bound host output has the computed dtype and shape.
fn check_output(
    plan: &crate::engine::EnginePlan,
    k: usize,
    dtype: DType,
    shape: &[usize],
    bound: Option<&Tensor>,
) -> Result<()> {
    match bound {
        Some(t) if t.dtype() != dtype || t.shape() != shape => {
            Err(output_mismatch(plan, k, dtype, shape, t.dtype(), t.shape()))
        }
        _ => Ok(()),
    }
}

/// The element where a `Slice` of `shape` starts, when its output is one contiguous block:
/// single indices of the axes before some axis, a step-1 range of that axis, whole axes
/// after it; `None` for anything else or an empty output.
fn sliced_block(s: &crate::layers::Slice, shape: &[usize]) -> Option<usize> {
    let dims = s.resolve(shape).ok()?;
    let first = dims
        .iter()
        .position(|&(_, _, n)| n != 1)
        .unwrap_or(dims.len());
    let mut start = 0;
    let mut stride = 1;
    for (k, (&(at, step, n), &d)) in dims.iter().zip(shape).enumerate().rev() {
        let whole = at == 0 && n == d && (step == 1 || n <= 1);
        let ok = match k.cmp(&first) {
            std::cmp::Ordering::Greater => whole,
            std::cmp::Ordering::Equal => n > 0 && (step == 1 || n <= 1),
            std::cmp::Ordering::Less => n == 1,
        };
        if !ok {
            return None;
        }
        start += usize::try_from(at).ok()? * stride;
        stride *= d;
    }
    Some(start)
}

#[cfg(test)]
mod tests {
    use super::sliced_block;
    use crate::layers::Slice;

    fn slice(starts: &[i64], ends: &[i64], axes: &[i64], steps: &[i64]) -> Slice {
        Slice {
            starts: starts.to_vec(),
            ends: ends.to_vec(),
            axes: axes.to_vec(),
            steps: steps.to_vec(),
        }
    }

    #[test]
    fn only_slices_that_are_one_contiguous_block_have_a_start() {
        let shape = [3, 2, 5, 8];
        let split = |i: i64| slice(&[i], &[i + 1], &[0], &[1]);
        assert_eq!(sliced_block(&split(0), &shape), Some(0));
        assert_eq!(sliced_block(&split(2), &shape), Some(160));
        assert_eq!(
            sliced_block(&slice(&[1], &[3], &[0], &[1]), &shape),
            Some(80)
        );
        let row = slice(&[2, 1, 3], &[3, 2, 5], &[0, 1, 2], &[1, 1, 1]);
        assert_eq!(sliced_block(&row, &shape), Some(160 + 40 + 24));
        assert_eq!(
            sliced_block(&slice(&[-1], &[i64::MAX], &[-1], &[1]), &[1, 1, 8]),
            Some(7)
        );
        let middle_then_partial = slice(&[1, 2], &[2, 4], &[1, 3], &[1, 1]);
        assert_eq!(sliced_block(&middle_then_partial, &shape), None);
        assert_eq!(sliced_block(&slice(&[0], &[3], &[0], &[2]), &shape), None);
        assert_eq!(sliced_block(&slice(&[0], &[4], &[3], &[1]), &shape), None);
        assert_eq!(sliced_block(&slice(&[2], &[-1], &[0], &[-1]), &shape), None);
        assert_eq!(sliced_block(&slice(&[3], &[3], &[0], &[1]), &shape), None);
    }
}
