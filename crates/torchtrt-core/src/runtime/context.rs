//! `ExecutionContext`: runs an engine, on any backend, on the caller's tensors or on
//! buffers bound by name.

use std::ffi::c_void;
use std::time::Duration;

use torchtrt_plugin_api::DType;

use super::graph::Graphs;
use super::io::{InputBinding, IoBuffer, MemoryKind, OutputTarget, RunInputs, host_view};
use super::walk::Walk;
use crate::backend::DeviceMemory;
use crate::engine::{Engine, EnginePlan, check_input, check_input_shapes, check_metas};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Time spent in one layer over the runs since profiling was enabled (TensorRT's
/// `IProfiler`).
#[derive(Clone, Debug)]
pub struct LayerTiming {
    /// Layer name.
    pub layer: String,
    /// Layer kind, e.g. `Convolution`.
    pub kind: &'static str,
    /// Runs measured.
    pub calls: u64,
    /// Total time, output allocation and shape inference included.
    pub total: Duration,
}

/// Environment variable that turns recorded runs (CUDA graphs) off when set to `0`.
pub const GRAPHS_ENV: &str = "TORCHTRT_CUDA_GRAPHS";

/// Executes an engine, whatever device it was built for (TensorRT's `IExecutionContext`,
/// onnxruntime's session with an `IoBinding`). Holds the activation memory, the device
/// resources (stream, memory pool, recorded runs) and the bindings it reuses from run to
/// run; create one per thread. Repeated runs at the same input shapes allocate nothing.
///
/// Two ways to run:
/// - [`Self::execute`] / [`Self::execute_named`]: host tensors in, new host tensors out;
/// - bound I/O: bind a buffer to every input and output by name ([`Self::bind_input`],
///   [`Self::bind_output`] — host memory, or device memory for a device engine — or
///   [`Self::bind_owned`] for memory the context owns), size the outputs with
///   [`Self::output_shapes`], then [`Self::execute_bound`] (waits) or [`Self::enqueue`]
///   (queues on a caller's stream). Outputs are written in place.
///
/// On a device that records runs (CUDA), from the second run of an input shape on a run
/// replays a recording of the whole walk (see [`Self::set_graphs`]).
pub struct ExecutionContext {
    walk: Walk,
    graphs: Graphs,
    inputs: Vec<InputBinding>,
    outputs: Vec<OutputTarget>,
    /// Device memory of [`Self::bind_owned`].
    owned: Vec<DeviceMemory>,
}

impl ExecutionContext {
    pub(crate) fn new(engine: Engine) -> Result<ExecutionContext> {
        let device = engine
            .backend()
            .create_device_context()
            .map_err(|e| Error::Engine(format!("{}: {e}", engine.backend().name())))?;
        let plan = engine.plan();
        let inputs = plan.inputs.iter().map(|_| InputBinding::None).collect();
        let outputs = plan
            .outputs
            .iter()
            .map(|_| OutputTarget::Return(None))
            .collect();
        let walk = Walk::new(engine, device);
        let graphs = Graphs::new(
            !walk.has_data_dependent() && std::env::var(GRAPHS_ENV).map_or(true, |v| v != "0"),
        );
        Ok(ExecutionContext {
            walk,
            graphs,
            inputs,
            outputs,
            owned: Vec::new(),
        })
    }

    /// The engine this context runs.
    pub fn engine(&self) -> &Engine {
        &self.walk.engine
    }

    /// The device the engine runs on: `cpu`, or its device's name (`cuda:0`).
    pub fn device(&self) -> String {
        self.walk
            .device
            .as_ref()
            .map_or_else(|| "cpu".to_string(), |d| d.name())
    }

    /// Where bound buffers of this engine's inputs and outputs may live: the device for
    /// engines whose context has one (host buffers work too, with copies), else the host.
    pub fn memory(&self) -> MemoryKind {
        if self.walk.device.is_some() {
            MemoryKind::Device
        } else {
            MemoryKind::Host
        }
    }

    /// Starts (or stops and discards) per-layer timing of later runs. On a device, each
    /// layer is timed from the moment the device is idle before it to the moment it is idle
    /// after it, so a profiled run waits for the device around every layer and is never
    /// replayed from a recording.
    pub fn set_profiling(&mut self, on: bool) {
        self.walk.profile = on.then(|| {
            self.walk
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
                .collect()
        });
    }

    /// Per-layer timings in execution order, when profiling is on.
    pub fn profile(&self) -> Option<&[LayerTiming]> {
        self.walk.profile.as_deref()
    }

    /// Turns recorded runs on (the default, unless the `TORCHTRT_CUDA_GRAPHS` environment
    /// variable is `0`) or off; off drops the recordings made so far. Devices that cannot
    /// record ignore it.
    pub fn set_graphs(&mut self, on: bool) {
        self.graphs.enabled = on;
        if !on {
            self.walk.drop_recordings(&mut self.graphs);
            self.graphs.captures = 0;
            self.graphs.replays = 0;
        }
    }

    /// How many runs were recorded and how many replayed one, since the context was created
    /// or graphs were last turned off.
    pub fn graph_counts(&self) -> (u64, u64) {
        (self.graphs.captures, self.graphs.replays)
    }

    /// Why the last recording that failed did (its run took the walk).
    pub fn last_capture_failure(&self) -> Option<&str> {
        self.graphs.last_failure.as_deref()
    }

    /// Sets the largest host tensor (bytes) a run may allocate; a layer whose output would
    /// be larger fails with an error naming it. Defaults to the machine's physical memory
    /// ([`crate::limits::physical_memory`]).
    pub fn set_memory_limit(&mut self, bytes: u64) {
        self.walk.pool.limit = bytes;
    }

    /// The memory limit of [`Self::set_memory_limit`].
    pub fn memory_limit(&self) -> u64 {
        self.walk.pool.limit
    }

    /// Bytes of activation memory (host and device) kept for later runs.
    pub fn pooled_bytes(&self) -> usize {
        self.walk.pool.held_bytes() + self.walk.device.as_ref().map_or(0, |d| d.pooled_bytes())
    }

    /// Runs the engine on host inputs in the engine's input order; returns new host tensors
    /// in its output order. For a device engine the inputs are uploaded and the outputs
    /// downloaded.
    pub fn execute(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let meta: Vec<(DType, &[usize])> = inputs.iter().map(|t| (t.dtype(), t.shape())).collect();
        check_input_shapes(self.walk.engine.plan(), &meta)?;
        let mut targets: Vec<OutputTarget> = self
            .walk
            .engine
            .plan()
            .outputs
            .iter()
            .map(|_| OutputTarget::Return(None))
            .collect();
        self.run(inputs, &mut targets)?;
        if let Some(d) = self.walk.device.as_mut() {
            d.synchronize().map_err(|message| Error::Execution {
                layer: "execute".into(),
                message,
            })?;
        }
        targets
            .into_iter()
            .zip(&self.walk.engine.plan().outputs)
            .map(|(t, (name, _))| match t {
                OutputTarget::Return(Some(t)) => Ok(t),
                _ => Err(Error::Execution {
                    layer: name.clone(),
                    message: "output was not computed".into(),
                }),
            })
            .collect()
    }

    /// Runs the engine on inputs given by name; returns the outputs by name, in the engine's
    /// output order.
    pub fn execute_named(&mut self, inputs: &[(&str, &Tensor)]) -> Result<Vec<(String, Tensor)>> {
        let plan = self.walk.engine.plan();
        for (name, _) in inputs {
            input_index(plan, name)?;
        }
        let ordered = plan
            .inputs
            .iter()
            .map(|i| {
                inputs
                    .iter()
                    .find(|(n, _)| *n == i.name)
                    .map(|(_, t)| *t)
                    .ok_or_else(|| Error::Input(format!("input `{}` is missing", i.name)))
            })
            .collect::<Result<Vec<&Tensor>>>()?;
        let names: Vec<String> = plan.outputs.iter().map(|(n, _)| n.clone()).collect();
        Ok(names.into_iter().zip(self.execute(&ordered)?).collect())
    }

    /// The outputs' shapes (engine output order) for inputs of these dtypes and shapes
    /// (engine input order), without running: what a caller allocates before a bound run.
    /// `Err` when an output shape depends on the values of an input. A length a kernel
    /// decides is given its upper bound (see [`Self::last_output_shapes`]).
    pub fn output_shapes(&mut self, inputs: &[(DType, &[usize])]) -> Result<Vec<Vec<usize>>> {
        check_input_shapes(self.walk.engine.plan(), inputs)?;
        self.walk.output_shapes(inputs)
    }

    /// Each engine output's shape in the last run that completed. An output whose length a
    /// kernel decides (an output sized by a count, such as non-maximum suppression's
    /// selection, or anything computed from one) may be bound to a buffer of its
    /// [`Self::output_shapes`], which gives such lengths their upper bound; the run writes
    /// its elements from the buffer's start, and this says how many there are.
    pub fn last_output_shapes(&self) -> &[Vec<usize>] {
        &self.walk.last_shapes
    }

    /// The outputs' shapes for the inputs bound now (see [`Self::output_shapes`]).
    pub fn bound_output_shapes(&mut self) -> Result<Vec<Vec<usize>>> {
        let plan = self.walk.engine.plan();
        let meta = self.bound_meta(plan)?;
        check_input_shapes(plan, &meta)?;
        self.walk.output_shapes(&meta)
    }

    fn bound_meta<'a>(&'a self, plan: &EnginePlan) -> Result<Vec<(DType, &'a [usize])>> {
        plan.inputs
            .iter()
            .enumerate()
            .map(|(k, spec)| match &self.inputs[k] {
                InputBinding::None => {
                    Err(Error::Input(format!("input `{}` is not bound", spec.name)))
                }
                _ => Ok(self.inputs.as_slice().meta(k)),
            })
            .collect()
    }

    /// Binds input `name` to a caller's buffer: host memory (used in place when it is
    /// 16-byte aligned, else copied at every run) or, for a device engine, device memory.
    /// Its dtype must be the input's, its shape within the engine's profile.
    ///
    /// # Safety
    /// `buffer.ptr` must hold the tensor's bytes (of host memory, or of the engine's device)
    /// and stay valid, readable from any thread, until the input is bound again or the
    /// context is dropped; it must not change while a run reads it.
    pub unsafe fn bind_input(&mut self, name: &str, buffer: &IoBuffer) -> Result<()> {
        let plan = self.walk.engine.plan();
        let k = input_index(plan, name)?;
        check_input(plan, k, buffer.dtype, &buffer.shape)?;
        let bytes = buffer.bytes()?;
        self.inputs[k] = match buffer.memory {
            MemoryKind::Host => {
                // SAFETY: per this function's contract.
                let (tensor, staged) =
                    unsafe { host_view(buffer.ptr, buffer.dtype, &buffer.shape, bytes) }?;
                InputBinding::Host { tensor, staged }
            }
            MemoryKind::Device => {
                self.need_device(name)?;
                InputBinding::Device {
                    ptr: buffer.ptr,
                    dtype: buffer.dtype,
                    shape: buffer.shape.clone(),
                }
            }
        };
        Ok(())
    }

    /// Binds output `name` to a caller's buffer (host memory, or device memory of a device
    /// engine), written in place by every later bound run. Its dtype must be the output's;
    /// its shape must be the output's shape at the inputs of each run, or, for an output
    /// whose length a kernel decides, one with room for it (the shape
    /// [`Self::output_shapes`] gives has; see [`Self::last_output_shapes`]).
    ///
    /// # Safety
    /// `buffer.ptr` must hold the tensor's bytes, writable from any thread, until the output
    /// is bound again or the context is dropped; nothing else may use it during a run.
    pub unsafe fn bind_output(&mut self, name: &str, buffer: &IoBuffer) -> Result<()> {
        let plan = self.walk.engine.plan();
        let k = output_index(plan, name)?;
        let want = self.walk.engine.tensor_types()[plan.outputs[k].1.index()].dtype;
        if buffer.dtype != want {
            return Err(Error::Input(format!(
                "output `{name}` is {want}, its buffer is {}",
                buffer.dtype
            )));
        }
        let bytes = buffer.bytes()?;
        self.outputs[k] = match buffer.memory {
            MemoryKind::Host => {
                // SAFETY: per this function's contract.
                let (tensor, staged) =
                    unsafe { host_view(buffer.ptr, buffer.dtype, &buffer.shape, bytes) }?;
                OutputTarget::Host {
                    tensor: Some(tensor),
                    staged,
                }
            }
            MemoryKind::Device => {
                self.need_device(name)?;
                OutputTarget::Device {
                    ptr: buffer.ptr,
                    dtype: buffer.dtype,
                    shape: buffer.shape.clone(),
                }
            }
        };
        Ok(())
    }

    fn need_device(&self, name: &str) -> Result<()> {
        if self.walk.device.is_none() {
            return Err(Error::Input(format!(
                "`{name}`: the engine runs on the CPU, bind host memory"
            )));
        }
        Ok(())
    }

    /// Binds every input to a copy of `inputs` (given by name) in memory the context owns on
    /// the engine's device (host memory for a CPU engine), and every output to memory it
    /// owns there too, shaped for those inputs: later [`Self::execute_bound`] runs move no
    /// data between host and device; [`Self::read_output`] copies an output back.
    pub fn bind_owned(&mut self, inputs: &[(&str, &Tensor)]) -> Result<()> {
        self.unbind();
        let engine = self.walk.engine.clone();
        let plan = engine.plan();
        let mut ordered: Vec<Option<&Tensor>> = vec![None; plan.inputs.len()];
        for (name, t) in inputs {
            let k = input_index(plan, name)?;
            check_input(plan, k, t.dtype(), t.shape())?;
            ordered[k] = Some(t);
        }
        let ordered: Vec<&Tensor> = ordered
            .into_iter()
            .zip(&plan.inputs)
            .map(|(t, spec)| {
                t.ok_or_else(|| Error::Input(format!("input `{}` is missing", spec.name)))
            })
            .collect::<Result<_>>()?;
        let meta: Vec<(DType, &[usize])> = ordered.iter().map(|t| (t.dtype(), t.shape())).collect();
        let shapes = self.output_shapes(&meta)?;
        let out_dtypes: Vec<DType> = plan
            .outputs
            .iter()
            .map(|(_, t)| engine.tensor_types()[t.index()].dtype)
            .collect();
        let Some(device) = self.walk.device.as_deref_mut() else {
            for (k, t) in ordered.iter().enumerate() {
                self.inputs[k] = InputBinding::Host {
                    tensor: (*t).clone(),
                    staged: None,
                };
            }
            for (k, shape) in shapes.iter().enumerate() {
                self.outputs[k] = OutputTarget::Host {
                    tensor: Some(Tensor::zeros(out_dtypes[k], shape)),
                    staged: None,
                };
            }
            return Ok(());
        };
        let fail = |message: String| Error::Execution {
            layer: "bind_owned".into(),
            message,
        };
        for (k, t) in ordered.iter().enumerate() {
            let m = device.alloc(t.bytes().len()).map_err(fail)?;
            self.owned.push(m);
            // SAFETY: the memory was just allocated with the tensor's size.
            unsafe { device.upload(t.bytes(), m.ptr) }.map_err(fail)?;
            self.inputs[k] = InputBinding::Device {
                ptr: m.ptr,
                dtype: t.dtype(),
                shape: t.shape().to_vec(),
            };
        }
        for (k, shape) in shapes.into_iter().enumerate() {
            let m = device
                .alloc(shape.iter().product::<usize>() * out_dtypes[k].size())
                .map_err(fail)?;
            self.owned.push(m);
            self.outputs[k] = OutputTarget::Device {
                ptr: m.ptr,
                dtype: out_dtypes[k],
                shape,
            };
        }
        device.synchronize().map_err(fail)
    }

    /// A host copy of output `name` as the last bound run left it (bound to memory of the
    /// context's or the caller's).
    pub fn read_output(&mut self, name: &str) -> Result<Tensor> {
        let k = output_index(self.walk.engine.plan(), name)?;
        match &self.outputs[k] {
            OutputTarget::Host {
                tensor: Some(t), ..
            } => Ok(t.clone()),
            OutputTarget::Device { ptr, dtype, shape } => {
                let mut t = Tensor::zeros(*dtype, shape);
                let device = self
                    .walk
                    .device
                    .as_deref_mut()
                    .ok_or_else(|| Error::Input("no device".into()))?;
                // SAFETY: the bound buffer holds the output's bytes.
                unsafe { device.download(*ptr, t.bytes_mut()) }.map_err(|message| {
                    Error::Execution {
                        layer: name.to_string(),
                        message,
                    }
                })?;
                Ok(t)
            }
            _ => Err(Error::Input(format!("output `{name}` is not bound"))),
        }
    }

    /// Forgets every binding (and frees the memory of [`Self::bind_owned`]).
    pub fn unbind(&mut self) {
        self.inputs.iter_mut().for_each(|b| *b = InputBinding::None);
        self.outputs
            .iter_mut()
            .for_each(|b| *b = OutputTarget::Return(None));
        if let Some(device) = self.walk.device.as_deref_mut() {
            for m in self.owned.drain(..) {
                device.release(m);
            }
        }
    }

    /// Runs the engine on the bound buffers and waits until the outputs are written. Outputs
    /// not bound are computed and dropped.
    pub fn execute_bound(&mut self) -> Result<()> {
        self.run_bound()?;
        if let Some(d) = self.walk.device.as_mut() {
            d.synchronize().map_err(|message| Error::Execution {
                layer: "execute".into(),
                message,
            })?;
        }
        Ok(())
    }

    /// Queues the engine on `stream` over the bound buffers (TensorRT's `enqueueV3`) and
    /// returns once the work is queued; nothing waits for the device except where a layer
    /// runs on the host (its inputs are downloaded first) or shape inference needs the
    /// values of a device tensor. A CPU engine runs at once; its `stream` must be null.
    /// Runs queued on one context must be ordered: one stream, or the caller synchronizes
    /// between streams.
    ///
    /// # Safety
    /// `stream` must be null (the device's default stream) or a live native stream of the
    /// engine's device (a `CUstream` of its primary context), valid until the queued work
    /// completes; the bound buffers must stay valid until then too.
    pub unsafe fn enqueue(&mut self, stream: *mut c_void) -> Result<()> {
        let Some(device) = self.walk.device.as_deref_mut() else {
            if !stream.is_null() {
                return Err(Error::Input(
                    "the engine runs on the CPU, which takes no stream".into(),
                ));
            }
            return self.run_bound();
        };
        let fail = |message: String| Error::Execution {
            layer: "enqueue".into(),
            message,
        };
        // SAFETY: per this function's contract.
        unsafe { device.use_stream(stream) }.map_err(fail)?;
        let result = self.run_bound();
        let restored = match self.walk.device.as_deref_mut() {
            Some(d) => d.restore_stream().map_err(fail),
            None => Ok(()),
        };
        result.and(restored)
    }

    /// Waits for all the work the context queued, on its own stream and on the stream of
    /// the last [`Self::enqueue`]. A CPU context has nothing to wait for.
    pub fn synchronize(&mut self) -> Result<()> {
        match self.walk.device.as_mut() {
            Some(d) => d.synchronize().map_err(|message| Error::Execution {
                layer: "synchronize".into(),
                message,
            }),
            None => Ok(()),
        }
    }

    fn run_bound(&mut self) -> Result<()> {
        let engine = self.walk.engine.clone();
        let plan = engine.plan();
        for binding in &mut self.inputs {
            if let InputBinding::Host {
                tensor,
                staged: Some(ptr),
            } = binding
            {
                let len = tensor.bytes().len();
                // SAFETY: the binding's contract: `ptr` holds the input's bytes.
                let src = unsafe { std::slice::from_raw_parts(*ptr as *const u8, len) };
                tensor.bytes_mut().copy_from_slice(src);
            }
        }
        for (k, spec) in plan.inputs.iter().enumerate() {
            if matches!(self.inputs[k], InputBinding::None) {
                return Err(Error::Input(format!("input `{}` is not bound", spec.name)));
            }
        }
        let bound = self.inputs.as_slice();
        check_metas(plan, |k| bound.meta(k))?;
        let inputs = std::mem::take(&mut self.inputs);
        let mut outputs = std::mem::take(&mut self.outputs);
        let result = self.run(inputs.as_slice(), &mut outputs);
        self.inputs = inputs;
        self.outputs = outputs;
        result?;
        for target in &self.outputs {
            if let OutputTarget::Host {
                tensor: Some(t),
                staged: Some(ptr),
            } = target
            {
                // SAFETY: the binding's contract: `ptr` holds the output's bytes.
                let dst =
                    unsafe { std::slice::from_raw_parts_mut(*ptr as *mut u8, t.bytes().len()) };
                dst.copy_from_slice(t.bytes());
            }
        }
        Ok(())
    }

    /// One run: a replay of its key's recording when there is one, else the walk, on the
    /// backend's preferred thread.
    fn run(
        &mut self,
        inputs: &(impl RunInputs + ?Sized),
        targets: &mut [OutputTarget],
    ) -> Result<()> {
        if self
            .walk
            .replay_or_record(&mut self.graphs, inputs, targets)?
        {
            return Ok(());
        }
        let backend = self.walk.engine.backend().clone();
        let walk = &mut self.walk;
        let mut result = Ok(());
        backend.run_scope(&mut || result = walk.run(inputs, targets));
        result
    }
}

impl Drop for ExecutionContext {
    fn drop(&mut self) {
        self.unbind();
        self.walk.drop_recordings(&mut self.graphs);
        if let Some(d) = self.walk.device.as_mut() {
            let _ = d.synchronize();
        }
    }
}

fn input_index(plan: &EnginePlan, name: &str) -> Result<usize> {
    plan.inputs
        .iter()
        .position(|i| i.name == name)
        .ok_or_else(|| {
            let known: Vec<&str> = plan.inputs.iter().map(|i| i.name.as_str()).collect();
            Error::Input(format!(
                "the engine has no input `{name}` (inputs: {})",
                known.join(", ")
            ))
        })
}

fn output_index(plan: &EnginePlan, name: &str) -> Result<usize> {
    plan.outputs
        .iter()
        .position(|(n, _)| n == name)
        .ok_or_else(|| {
            let known: Vec<&str> = plan.outputs.iter().map(|(n, _)| n.as_str()).collect();
            Error::Input(format!(
                "the engine has no output `{name}` (outputs: {})",
                known.join(", ")
            ))
        })
}

impl Engine {
    /// A new execution context with its own activation memory and, for a device engine,
    /// its own device resources (stream, memory pool); `Err` when the device cannot
    /// provide them.
    pub fn create_context(&self) -> Result<ExecutionContext> {
        ExecutionContext::new(self.clone())
    }
}
