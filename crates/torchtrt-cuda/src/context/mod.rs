//! `CudaExecutionContext`: runs a CUDA engine with its activations on the device.
//!
//! The context walks the engine's plan like the host runtime's `ExecutionContext`: every
//! layer's output shapes are inferred from its inputs' shapes (and, for shape tensors, their
//! values), tensors are released after their last use, constant layers and layers derived
//! from constants alone are computed once. Each tensor lives on the host, on the device or
//! both: layers with a CUDA kernel and plugin layers placed on CUDA run on the context's
//! stream over device memory; other layers run on the host, their inputs downloaded (which
//! waits for the stream) and their outputs uploaded when a device layer needs them.
//! Shape-only layers (`Shape`, `Size`) and small integer layers whose inputs are on the
//! host stay on the host, so shape arithmetic never waits for the device.
//!
//! A repeated input shape replays a CUDA graph of the whole run (`graph.rs`). The context's
//! allocations (activations, kernels' scratch, cuBLAS workspaces) come from a
//! [`ScratchPool`] of its own, so memory it frees while its queued work may still use it is
//! never handed to another context's stream.

mod copy;
mod graph;
mod value;

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

use torchtrt_core::layers::LayerKind;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Engine, Error, LayerTiming, Result, Tensor};

use crate::device::CudaDevice;
use crate::error::CudaError;
use crate::layer_kernel::DeviceLayerKernel;
use crate::memory::ScratchPool;
use crate::plugin_kernel::DevicePluginKernel;
use crate::stream::{Event, Stream};
use graph::{Graphs, Key};
use value::{Dev, DevicePool, Host, Value};

/// A tensor on the device given to or by [`CudaExecutionContext::enqueue`]: its address,
/// dtype and shape (dense, row-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceIo {
    /// Device address (`CUdeviceptr`).
    pub ptr: u64,
    /// Element type.
    pub dtype: DType,
    /// Dimensions.
    pub shape: Vec<usize>,
}

/// Where a layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A constant: uploaded once per context when a device layer reads it.
    Constant,
    /// A CUDA kernel of a core layer, on the stream.
    Device,
    /// A plugin's CUDA kernel, on the stream.
    Plugin,
    /// The host, with copies of its inputs and outputs as needed.
    Host,
}

/// A tensor's dtype and concrete shape.
type Meta = (DType, Vec<usize>);

/// Integer tensors up to this many elements are downloaded when shape inference needs their
/// values, and kept on the host by small integer layers.
const SHAPE_TENSOR_ELEMENTS: usize = 1 << 16;

/// Environment variable that turns CUDA graph replay off when set to `0`.
pub const GRAPHS_ENV: &str = "TORCHTRT_CUDA_GRAPHS";

/// Runs an engine built for a CUDA device with its activations in device memory (TensorRT's
/// `IExecutionContext` with `enqueueV3`). Holds its own stream, device buffers reused from
/// run to run, and the device copies of constants; create one per thread. Runs queued on a
/// context must be ordered: one stream, or the caller synchronizes between streams.
///
/// From the second run of an input shape on, a run replays a CUDA graph captured from the
/// walk over all layers (see [`Self::set_graphs`]); runs that cannot be captured keep the
/// per-layer walk.
pub struct CudaExecutionContext {
    engine: Engine,
    device: CudaDevice,
    stream: Arc<Stream>,
    places: Vec<Placement>,
    /// Per layer: outputs follow from constants alone (computed on the first run).
    derived: Vec<bool>,
    /// Per layer: the dtypes and shapes of a derived layer's outputs, once computed.
    cached: Vec<Option<Vec<Meta>>>,
    /// Per tensor: kept host and device copies of constant and derived tensors.
    keep_host: Vec<Option<Arc<Tensor>>>,
    keep_dev: Vec<Option<Dev>>,
    is_kept: Vec<bool>,
    pool: DevicePool,
    profile: Option<Profile>,
    /// The context's own device memory (see [`ScratchPool`]).
    scratch: Arc<ScratchPool>,
    graphs: Graphs,
    use_graphs: bool,
    /// A run is being captured: steps that wait for the stream or copy host memory fail.
    capturing: bool,
    /// Recorded after the last `enqueue` on its caller's stream: what dropping the context
    /// waits for (a device-wide synchronisation would break other threads' captures).
    enqueued: Option<Event>,
}

struct Profile {
    timings: Vec<LayerTiming>,
}

fn cuda_error(layer: &str) -> impl Fn(CudaError) -> Error + '_ {
    move |e| Error::Execution {
        layer: layer.to_string(),
        message: e.to_string(),
    }
}

impl CudaExecutionContext {
    /// A context for `engine` on `device`; `Err` when the engine does not target a CUDA
    /// device of `device`'s compute capability.
    pub fn new(engine: &Engine, device: &CudaDevice) -> Result<CudaExecutionContext> {
        let (major, minor) = device.compute_capability();
        if engine.target() != (torchtrt_core::Target::Cuda { major, minor }) {
            return Err(Error::Engine(format!(
                "the engine targets {}, {device:?} is cuda sm_{major}{minor}",
                engine.target()
            )));
        }
        let plan = engine.plan();
        let places: Vec<Placement> = (0..plan.layers.len())
            .map(|li| placement(engine, li))
            .collect();
        let derived = engine.plan().constant_derived();
        let mut is_kept = vec![false; plan.tensor_names.len()];
        for (li, layer) in plan.layers.iter().enumerate() {
            if derived[li] || places[li] == Placement::Constant {
                for t in &layer.outputs {
                    is_kept[t.index()] = true;
                }
            }
        }
        let n = plan.tensor_names.len();
        Ok(CudaExecutionContext {
            engine: engine.clone(),
            device: device.clone(),
            stream: Arc::new(
                device
                    .new_stream()
                    .map_err(|e| Error::Engine(e.to_string()))?,
            ),
            cached: vec![None; plan.layers.len()],
            derived,
            places,
            keep_host: vec![None; n],
            keep_dev: vec![None; n],
            is_kept,
            pool: DevicePool::default(),
            profile: None,
            scratch: device.allocator().scratch_pool(),
            graphs: Graphs::default(),
            use_graphs: std::env::var(GRAPHS_ENV).map_or(true, |v| v != "0"),
            capturing: false,
            enqueued: None,
        })
    }

    /// The engine this context runs.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The context's own stream, on which [`Self::execute`] queues its work.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Where each layer runs, in execution order.
    pub fn placements(&self) -> &[Placement] {
        &self.places
    }

    /// Bytes of device activation memory kept for the next run.
    pub fn pooled_bytes(&self) -> usize {
        self.pool.held_bytes()
    }

    /// Starts (or stops and discards) per-layer timing of later runs: each layer is timed
    /// from the moment the stream is idle before it to the moment it is idle after it, so a
    /// profiled run waits for its stream around every layer.
    pub fn set_profiling(&mut self, on: bool) {
        self.profile = on.then(|| Profile {
            timings: self
                .engine
                .plan()
                .layers
                .iter()
                .map(|l| LayerTiming {
                    layer: l.name.clone(),
                    kind: l.kind.op().kind(),
                    calls: 0,
                    total: Duration::ZERO,
                })
                .collect(),
        });
    }

    /// Turns CUDA graph replay on (the default, unless the `TORCHTRT_CUDA_GRAPHS`
    /// environment variable is `0`) or off; off drops the graphs captured so far.
    pub fn set_graphs(&mut self, on: bool) {
        self.use_graphs = on;
        if !on {
            self.graphs = Graphs::default();
        }
    }

    /// How many graphs were captured and how many runs replayed one, since the context was
    /// created.
    pub fn graph_counts(&self) -> (u64, u64) {
        (self.graphs.captures, self.graphs.replays)
    }

    /// Why the last capture of a run that failed did (the run took the per-layer walk).
    pub fn last_capture_failure(&self) -> Option<&str> {
        self.graphs.last_failure.as_deref()
    }

    /// Per-layer timings in execution order, when profiling is on.
    pub fn profile(&self) -> Option<&[LayerTiming]> {
        self.profile.as_ref().map(|p| p.timings.as_slice())
    }

    /// Runs the engine on host inputs (engine input order): uploads them, runs on the
    /// context's stream, downloads the outputs (engine output order) and waits.
    pub fn execute(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let described: Vec<(DType, &[usize])> =
            inputs.iter().map(|t| (t.dtype(), t.shape())).collect();
        self.engine.check_inputs(&described)?;
        let key: Key = inputs
            .iter()
            .map(|t| (t.dtype(), t.shape().to_vec()))
            .collect();
        let stream = self.stream.clone();
        if let Some(g) = self.graph_for(&key) {
            graph::replay(g, &stream, |i, ptr| {
                // SAFETY: the graph's input buffer holds input `i`'s bytes (same shape).
                unsafe { copy::upload(&stream, inputs[i].bytes(), ptr) }
                    .map_err(cuda_error("execute"))
            })?;
            let mut result = Vec::with_capacity(g.outputs.len());
            for o in &g.outputs {
                let mut t = Tensor::zeros(o.dtype, &o.shape);
                // SAFETY: the graph leaves the output's bytes at `o.ptr`.
                unsafe { copy::download(&stream, o.ptr, t.bytes_mut()) }
                    .map_err(cuda_error("execute"))?;
                result.push(t);
            }
            self.graphs.replays += 1;
            return Ok(result);
        }
        let values: Vec<Value<'_>> = inputs
            .iter()
            .map(|t| Value {
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
                host: Some(Host::Borrowed(t)),
                dev: None,
            })
            .collect();
        let stream = stream.as_ref();
        let outs = self.run(values, None, stream)?;
        let mut result = Vec::with_capacity(outs.len());
        for (k, v) in outs.iter().enumerate() {
            let name = &self.engine.plan().outputs[k].0;
            let t = match (&v.host, &v.dev) {
                (Some(h), _) => h.get().clone(),
                (None, Some(dev)) => {
                    let mut t = Tensor::zeros(v.dtype, &v.shape);
                    // SAFETY: the device copy holds the tensor's bytes.
                    unsafe { copy::download(stream, dev.ptr(), t.bytes_mut()) }
                        .map_err(cuda_error(name))?;
                    t
                }
                (None, None) => {
                    return Err(Error::Execution {
                        layer: name.clone(),
                        message: "output was not computed".into(),
                    });
                }
            };
            result.push(t);
        }
        self.recycle(outs);
        stream.synchronize().map_err(cuda_error("execute"))?;
        Ok(result)
    }

    /// The shapes of the outputs (engine output order) for inputs of these dtypes and
    /// shapes (engine input order), without running device work: what a caller allocates
    /// before [`Self::enqueue`]. `Err` when an output shape depends on the values of a
    /// non-constant input.
    pub fn output_shapes(&mut self, inputs: &[(DType, &[usize])]) -> Result<Vec<Vec<usize>>> {
        self.engine.check_inputs(inputs)?;
        shapes::output_shapes(self, inputs)
    }

    /// Queues the engine on the caller's `stream` over caller-owned device buffers
    /// (TensorRT's `enqueueV3`): inputs and outputs in engine order, outputs shaped as
    /// [`Self::output_shapes`] says. Returns once the work is queued; nothing waits for the
    /// device except where a layer runs on the host (its inputs are downloaded first) or
    /// shape inference needs the values of a device tensor.
    ///
    /// # Safety
    /// Every `ptr` must be a device address of this context's device holding the tensor's
    /// bytes (outputs writable), valid until the queued work completes; `stream` must be
    /// null (the legacy default stream) or a live `CUstream` of the device's primary
    /// context.
    pub unsafe fn enqueue(
        &mut self,
        inputs: &[DeviceIo],
        outputs: &[DeviceIo],
        stream: *mut c_void,
    ) -> Result<()> {
        let described: Vec<(DType, &[usize])> = inputs
            .iter()
            .map(|t| (t.dtype, t.shape.as_slice()))
            .collect();
        self.engine.check_inputs(&described)?;
        let engine = self.engine.clone();
        let plan = engine.plan();
        if outputs.len() != plan.outputs.len() {
            return Err(Error::Input(format!(
                "the engine has {} outputs, got {} output buffers",
                plan.outputs.len(),
                outputs.len()
            )));
        }
        // SAFETY: per this function's contract.
        let stream = unsafe { Stream::from_raw(&self.device, stream) };
        let key: Key = inputs.iter().map(|t| (t.dtype, t.shape.clone())).collect();
        if let Some(g) = self.graph_for(&key) {
            for (k, (o, want)) in g.outputs.iter().zip(outputs).enumerate() {
                check_meta(&plan.outputs[k].0, o.dtype, &o.shape, want)?;
            }
            graph::replay(g, &stream, |i, ptr| {
                let bytes = inputs[i].shape.iter().product::<usize>() * inputs[i].dtype.size();
                // SAFETY: the caller's input holds `bytes` bytes (checked shape), as does
                // the graph's input buffer.
                unsafe { copy::device_copy(&stream, inputs[i].ptr, ptr, bytes) }
                    .map_err(cuda_error("enqueue"))
            })?;
            for (k, (o, want)) in g.outputs.iter().zip(outputs).enumerate() {
                let bytes = o.shape.iter().product::<usize>() * o.dtype.size();
                // SAFETY: both hold the output's bytes (checked shape and dtype).
                unsafe { copy::device_copy(&stream, o.ptr, want.ptr, bytes) }
                    .map_err(cuda_error(&plan.outputs[k].0))?;
            }
            self.graphs.replays += 1;
            return self.mark_enqueued(&stream);
        }
        let values: Vec<Value<'_>> = inputs
            .iter()
            .map(|t| Value {
                dtype: t.dtype,
                shape: t.shape.clone(),
                host: None,
                dev: Some(Dev::External(t.ptr)),
            })
            .collect();
        let outs = self.run(values, Some(outputs), &stream)?;
        let copied = self.copy_outputs(&engine, &outs, outputs, &stream);
        self.recycle(outs);
        copied?;
        self.mark_enqueued(&stream)
    }

    /// Gives the device copies of a run's outputs back to the pool (after the work using
    /// them was queued on the context's stream).
    fn recycle(&mut self, outs: Vec<Value<'_>>) {
        for v in outs {
            if let Some(d) = v.dev {
                self.pool.release(d);
            }
        }
    }

    /// Queues copies of the outputs not already written in place into the caller's buffers.
    fn copy_outputs(
        &self,
        engine: &Engine,
        outs: &[Value<'_>],
        outputs: &[DeviceIo],
        stream: &Stream,
    ) -> Result<()> {
        let plan = engine.plan();
        for (k, (v, want)) in outs.iter().zip(outputs).enumerate() {
            let name = &plan.outputs[k].0;
            check_output(name, v, want)?;
            match (&v.dev, &v.host) {
                (Some(d), _) => {
                    // SAFETY: both hold the output's bytes (checked shape and dtype).
                    unsafe { copy::device_copy(stream, d.ptr(), want.ptr, v.bytes()) }
                }
                (None, Some(h)) => {
                    // SAFETY: the caller's buffer holds the output's bytes.
                    unsafe { copy::upload(stream, h.get().bytes(), want.ptr) }
                }
                (None, None) => {
                    return Err(Error::Execution {
                        layer: name.clone(),
                        message: "output was not computed".into(),
                    });
                }
            }
            .map_err(cuda_error(name))?;
        }
        Ok(())
    }
}

mod shapes;
mod walk;

impl CudaExecutionContext {
    /// Records the end of an `enqueue`'s work on `stream` for [`Drop`] to wait for.
    fn mark_enqueued(&mut self, stream: &Stream) -> Result<()> {
        if self.enqueued.is_none() {
            self.enqueued = Some(Event::new(&self.device).map_err(cuda_error("enqueue"))?);
        }
        if let Some(e) = &self.enqueued {
            e.record(stream).map_err(cuda_error("enqueue"))?;
        }
        Ok(())
    }
}

impl Drop for CudaExecutionContext {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
        if let Some(e) = &self.enqueued {
            let _ = e.synchronize();
        }
    }
}

fn check_output(name: &str, v: &Value<'_>, io: &DeviceIo) -> Result<()> {
    check_meta(name, v.dtype, &v.shape, io)
}

fn check_meta(name: &str, dtype: DType, shape: &[usize], io: &DeviceIo) -> Result<()> {
    if dtype != io.dtype || shape != io.shape.as_slice() {
        return Err(Error::Input(format!(
            "output `{name}` is {dtype}{shape:?}, its buffer is described as {}{:?}",
            io.dtype, io.shape
        )));
    }
    Ok(())
}

/// Where layer `li` of `engine` runs, from its kernel's type.
pub(crate) fn placement(engine: &Engine, li: usize) -> Placement {
    if matches!(engine.plan().layers[li].kind, LayerKind::Constant(_)) {
        return Placement::Constant;
    }
    let any = engine.kernel(li).and_then(|k| k.as_any());
    match any {
        Some(a) if a.is::<DeviceLayerKernel>() => Placement::Device,
        Some(a) if a.is::<DevicePluginKernel>() => Placement::Plugin,
        _ => Placement::Host,
    }
}
