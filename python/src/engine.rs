//! `torchtrt._torchtrt.Engine`: a built engine and the execution contexts that run it, one
//! per concurrent caller, on numpy arrays and torch tensors bound in place.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use torchtrt::plugin_api::DType;
use torchtrt::{Dim, Engine, ExecutionContext, IoBuffer, MemoryKind, Tensor};

use crate::arrays::{self, CallStream, Kind};
use crate::dlpack::{Borrowed, Device};
use crate::error::{msg, raise};

/// A context kept for reuse, with the CUDA stream its last run was queued on and the output
/// shapes of its last input shapes (reused while they repeat).
struct Slot {
    ctx: ExecutionContext,
    stream: Option<u64>,
    last: Option<(Vec<Meta>, Vec<Vec<usize>>)>,
}

/// An input's dtype and shape.
type Meta = (DType, Vec<usize>);

impl Slot {
    fn new(ctx: ExecutionContext) -> Slot {
        Slot {
            ctx,
            stream: None,
            last: None,
        }
    }

    /// The output shapes for inputs of these dtypes and shapes.
    fn output_shapes(&mut self, metas: &[(DType, &[usize])]) -> torchtrt::Result<Vec<Vec<usize>>> {
        if let Some((inputs, shapes)) = &self.last {
            let same = inputs.len() == metas.len()
                && inputs
                    .iter()
                    .zip(metas)
                    .all(|((d, s), (md, ms))| d == md && s.as_slice() == *ms);
            if same {
                return Ok(shapes.clone());
            }
        }
        let shapes = self.ctx.output_shapes(metas)?;
        let inputs = metas.iter().map(|(d, s)| (*d, s.to_vec())).collect();
        self.last = Some((inputs, shapes.clone()));
        Ok(shapes)
    }
}

/// An engine: call it on arrays, inspect its inputs and outputs, serialize it.
#[pyclass(name = "Engine", module = "torchtrt._torchtrt", frozen)]
pub struct PyEngine {
    engine: Engine,
    device: String,
    ordinal: Option<i32>,
    idle: Mutex<Vec<Slot>>,
}

impl PyEngine {
    /// Wraps an engine; creates its first context (so a device that cannot run it fails here).
    pub fn new(engine: Engine) -> PyResult<PyEngine> {
        let ctx = engine
            .create_context()
            .map_err(|e| raise("creating an execution context", &e))?;
        let device = ctx.device();
        let ordinal = device
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<i32>().ok());
        Ok(PyEngine {
            engine,
            device,
            ordinal,
            idle: Mutex::new(vec![Slot::new(ctx)]),
        })
    }

    fn take(&self) -> PyResult<Slot> {
        let slot = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match slot {
            Some(s) => Ok(s),
            None => Ok(Slot::new(
                self.engine
                    .create_context()
                    .map_err(|e| raise("creating an execution context", &e))?,
            )),
        }
    }

    fn give_back(&self, slot: Slot) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(slot);
    }

    /// Checks that an array on `device` can feed this engine.
    fn check_device(&self, device: Device, what: &dyn Fn() -> String) -> PyResult<()> {
        match device {
            Device::Cpu => Ok(()),
            Device::Cuda(n) if Some(n) == self.ordinal => Ok(()),
            other => Err(msg(format!(
                "{} is on {}, the engine runs on {}",
                what(),
                other.name(),
                self.device
            ))),
        }
    }

    /// Runs the engine on `inputs` (engine input order); returns the outputs, made by the
    /// library of the first input on its device.
    fn run_arrays<'py>(
        &self,
        py: Python<'py>,
        inputs: &[Bound<'py, PyAny>],
        given: Option<Vec<Bound<'py, PyAny>>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let plan = self.engine.plan();
        if inputs.len() != plan.inputs.len() {
            let names: Vec<&str> = plan.inputs.iter().map(|i| i.name.as_str()).collect();
            return Err(msg(format!(
                "the engine takes {} inputs ({}), got {}",
                plan.inputs.len(),
                names.join(", "),
                inputs.len()
            )));
        }
        let mut kind = Kind::Numpy;
        let mut out_device = Device::Cpu;
        let mut stream = CallStream::default();
        let mut host_buffers = false;
        let mut borrowed = Vec::with_capacity(inputs.len());
        for (k, (x, spec)) in inputs.iter().zip(&plan.inputs).enumerate() {
            let what = || format!("input `{}`", spec.name);
            let (this, b) =
                arrays::borrow(x, &mut stream, &what, &|d| self.check_device(d, &what))?;
            if k == 0 {
                kind = this;
                out_device = b.device;
            }
            host_buffers |= b.device == Device::Cpu;
            borrowed.push(b);
        }
        let mut slot = self.take()?;
        let metas: Vec<(DType, &[usize])> = borrowed
            .iter()
            .map(|b| (b.dtype, b.shape.as_slice()))
            .collect();
        let shapes = match slot.output_shapes(&metas) {
            Ok(s) => s,
            Err(e) if given.is_none() && needs_values(&e) && !host_buffers_only(&borrowed) => {
                self.give_back(slot);
                return Err(raise(
                    "",
                    &torchtrt::Error::Input(format!(
                        "{e}; pass host arrays (numpy or CPU tensors) for such a run"
                    )),
                ));
            }
            Err(e) if given.is_none() && needs_values(&e) => {
                let names: Vec<&str> = plan.outputs.iter().map(|(n, _)| n.as_str()).collect();
                let result = run_allocating(py, &mut slot, &borrowed, &names, kind);
                self.give_back(slot);
                return result;
            }
            Err(e) => {
                self.give_back(slot);
                return Err(raise("", &e));
            }
        };
        let made = match given {
            Some(given) => self.check_outputs(given, &shapes, &mut stream),
            None => self.new_outputs(py, kind, out_device, &shapes, &mut stream),
        };
        let (outputs, out_borrowed) = match made {
            Ok(m) => m,
            Err(e) => {
                self.give_back(slot);
                return Err(e);
            }
        };
        host_buffers |= out_borrowed.iter().any(|b| b.device == Device::Cpu);
        let ins: Vec<(&str, IoBuffer)> = plan
            .inputs
            .iter()
            .zip(&borrowed)
            .map(|(s, b)| (s.name.as_str(), buffer(b)))
            .collect();
        let outs: Vec<(&str, IoBuffer)> = plan
            .outputs
            .iter()
            .zip(&out_borrowed)
            .map(|((n, _), b)| (n.as_str(), buffer(b)))
            .collect();
        let native = stream.native();
        let result = py.detach(|| -> torchtrt::Result<Vec<Vec<usize>>> {
            if slot.stream.is_some() && slot.stream != native {
                slot.ctx.synchronize()?;
            }
            slot.stream = native;
            for (name, b) in &ins {
                // SAFETY: the borrowed arrays (`borrowed`, `out_borrowed`) hold the memory
                // until after the run: synchronous runs finish here; queued runs use PyTorch's
                // current stream, on which the caching allocator orders any reuse.
                unsafe { slot.ctx.bind_input(name, b) }?;
            }
            for (name, b) in &outs {
                // SAFETY: as above; the outputs are new arrays nothing else uses.
                unsafe { slot.ctx.bind_output(name, b) }?;
            }
            match native {
                Some(s) => {
                    // SAFETY: a live stream of the engine's device, from PyTorch.
                    unsafe { slot.ctx.enqueue(s as *mut std::ffi::c_void) }?;
                    if host_buffers {
                        slot.ctx.synchronize()?;
                    }
                }
                None => slot.ctx.execute_bound()?,
            }
            Ok(slot.ctx.last_output_shapes().to_vec())
        });
        self.give_back(slot);
        let actual = result.map_err(|e| raise("", &e))?;
        drop(borrowed);
        drop(out_borrowed);
        outputs
            .into_iter()
            .zip(shapes.iter().zip(&actual))
            .map(|(o, (allocated, actual))| {
                if allocated == actual {
                    Ok(o)
                } else {
                    actual_view(py, o, actual)
                }
            })
            .collect()
    }
}

/// The first elements of an output array allocated at an upper bound, as a view of the
/// shape a run gave it (`a.reshape(-1)[:n].reshape(shape)`, for NumPy and PyTorch alike).
fn actual_view<'py>(
    py: Python<'py>,
    array: Bound<'py, PyAny>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let n: usize = shape.iter().product();
    let flat = array.call_method1("reshape", (-1i64,))?;
    let head = flat.get_item(pyo3::types::PySlice::new(py, 0, n as isize, 1))?;
    head.call_method1("reshape", (pyo3::types::PyTuple::new(py, shape)?,))
}

impl Drop for PyEngine {
    /// Waits for runs still queued on PyTorch's streams before their contexts' memory goes.
    fn drop(&mut self) {
        let idle = self.idle.get_mut().unwrap_or_else(|e| e.into_inner());
        for slot in idle.iter_mut().filter(|s| s.stream.is_some()) {
            if let Err(e) = slot.ctx.synchronize() {
                tracing::warn!("dropping an engine: {e}");
            }
        }
    }
}

/// Whether `e` says an output's shape depends on input values, which only a run knows.
fn needs_values(e: &torchtrt::Error) -> bool {
    matches!(e, torchtrt::Error::Execution { message, .. }
        if message.contains("cannot be known before the run"))
}

/// Whether every array lies in host memory.
fn host_buffers_only(borrowed: &[Borrowed]) -> bool {
    borrowed.iter().all(|b| b.device == Device::Cpu)
}

/// A run whose output shapes depend on input values (an `Expand` to a shape the caller
/// passes, say): the host inputs are copied in, the engine allocates its outputs as it goes,
/// and each output is copied into a new host array of `kind`.
fn run_allocating<'py>(
    py: Python<'py>,
    slot: &mut Slot,
    borrowed: &[Borrowed],
    names: &[&str],
    kind: Kind,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let inputs = borrowed
        .iter()
        .map(|b| {
            let len = b.shape.iter().product::<usize>() * b.dtype.size();
            let bytes = if len == 0 {
                &[][..]
            } else {
                // SAFETY: `b` borrows a contiguous host array of its dtype and shape for the
                // whole call.
                unsafe { std::slice::from_raw_parts(b.ptr as *const u8, len) }
            };
            Tensor::from_bytes(b.dtype, &b.shape, bytes).map_err(|e| raise("", &e))
        })
        .collect::<PyResult<Vec<Tensor>>>()?;
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let outputs = py
        .detach(|| slot.ctx.execute(&refs))
        .map_err(|e| raise("", &e))?;
    outputs
        .into_iter()
        .zip(names)
        .map(|(t, name)| {
            let o = arrays::empty(py, kind, Device::Cpu, t.dtype(), t.shape(), name)?;
            let dst = Borrowed::new(&o, None, &|| format!("output `{name}`"))?;
            if !t.bytes().is_empty() {
                // SAFETY: `o` is a new contiguous host array of `t`'s dtype and shape.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        t.bytes().as_ptr(),
                        dst.ptr as *mut u8,
                        t.bytes().len(),
                    )
                };
            }
            Ok(o)
        })
        .collect()
}

/// The bound-I/O description of a borrowed array.
fn buffer(b: &Borrowed) -> IoBuffer {
    IoBuffer {
        memory: if b.device == Device::Cpu {
            MemoryKind::Host
        } else {
            MemoryKind::Device
        },
        ptr: b.ptr,
        dtype: b.dtype,
        shape: b.shape.clone(),
    }
}

/// Output arrays and their borrowed memory.
type Outputs<'py> = (Vec<Bound<'py, PyAny>>, Vec<Borrowed>);

impl PyEngine {
    /// New arrays for the outputs, of `kind` on `device`.
    fn new_outputs<'py>(
        &self,
        py: Python<'py>,
        kind: Kind,
        device: Device,
        shapes: &[Vec<usize>],
        stream: &mut CallStream,
    ) -> PyResult<Outputs<'py>> {
        let plan = self.engine.plan();
        let mut outputs = Vec::with_capacity(shapes.len());
        let mut borrowed = Vec::with_capacity(shapes.len());
        for ((name, t), shape) in plan.outputs.iter().zip(shapes) {
            let dtype = self.engine.tensor_types()[t.index()].dtype;
            let o = arrays::empty(py, kind, device, dtype, shape, name)?;
            let what = || format!("output `{name}`");
            let (_, b) = arrays::borrow(&o, stream, &what, &|_| Ok(()))?;
            borrowed.push(b);
            outputs.push(o);
        }
        Ok((outputs, borrowed))
    }

    /// The caller's output arrays, checked against the engine's outputs at `shapes`.
    fn check_outputs<'py>(
        &self,
        given: Vec<Bound<'py, PyAny>>,
        shapes: &[Vec<usize>],
        stream: &mut CallStream,
    ) -> PyResult<Outputs<'py>> {
        let plan = self.engine.plan();
        if given.len() != plan.outputs.len() {
            return Err(msg(format!(
                "the engine has {} outputs, {} arrays were given for them",
                plan.outputs.len(),
                given.len()
            )));
        }
        let mut borrowed = Vec::with_capacity(given.len());
        for ((o, (name, t)), shape) in given.iter().zip(&plan.outputs).zip(shapes) {
            let what = || format!("output `{name}`");
            let (_, b) = arrays::borrow(o, stream, &what, &|d| self.check_device(d, &what))?;
            let dtype = self.engine.tensor_types()[t.index()].dtype;
            if b.dtype != dtype || &b.shape != shape {
                return Err(msg(format!(
                    "output `{name}` is {}{:?}, the engine writes {dtype}{shape:?}",
                    b.dtype, b.shape
                )));
            }
            borrowed.push(b);
        }
        Ok((given, borrowed))
    }
}

fn int(py: Python<'_>, v: i64) -> Bound<'_, PyAny> {
    pyo3::types::PyInt::new(py, v).into_any()
}

fn text<'py>(py: Python<'py>, v: &str) -> Bound<'py, PyAny> {
    pyo3::types::PyString::new(py, v).into_any()
}

/// One dim at its min, opt or max (`pick`).
fn dim_value<'py>(py: Python<'py>, d: &Dim, pick: fn(i64, i64, i64) -> i64) -> Bound<'py, PyAny> {
    match d {
        Dim::Fixed(v) => int(py, *v),
        Dim::Dynamic { min, opt, max, .. } => int(py, pick(*min, *opt, *max)),
    }
}

#[pymethods]
impl PyEngine {
    /// Runs the engine on arrays in input order: one output is returned as is, several as a
    /// tuple.
    #[pyo3(signature = (*inputs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut outs = self.run_arrays(py, &inputs, None)?;
        if outs.len() == 1 {
            return Ok(outs.remove(0));
        }
        Ok(PyTuple::new(py, outs)?.into_any())
    }

    /// Runs the engine on arrays in input order; returns the outputs as a list: new arrays,
    /// or `outputs` (written in place) when given.
    #[pyo3(signature = (inputs, outputs = None))]
    fn run_list<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Bound<'py, PyAny>>,
        outputs: Option<Vec<Bound<'py, PyAny>>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        self.run_arrays(py, &inputs, outputs)
    }

    /// Times the Rust side alone, for the binding's overhead (`bench/python_overhead.py`):
    /// binds `inputs` and new outputs once, then runs `iterations` times in Rust (a CUDA
    /// engine enqueues on PyTorch's current stream and waits each time); returns each run's
    /// seconds.
    fn time_bound_runs<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Bound<'py, PyAny>>,
        iterations: usize,
    ) -> PyResult<Vec<f64>> {
        let outputs = self.run_arrays(py, &inputs, None)?;
        let plan = self.engine.plan();
        let mut stream = CallStream::default();
        let mut bind = |x: &Bound<'py, PyAny>, what: &str| -> PyResult<Borrowed> {
            let what = || what.to_string();
            Ok(arrays::borrow(x, &mut stream, &what, &|d| self.check_device(d, &what))?.1)
        };
        let ins = inputs
            .iter()
            .map(|x| bind(x, "input"))
            .collect::<PyResult<Vec<_>>>()?;
        let outs = outputs
            .iter()
            .map(|x| bind(x, "output"))
            .collect::<PyResult<Vec<_>>>()?;
        let native = stream.native();
        let mut ctx = self
            .engine
            .create_context()
            .map_err(|e| raise("creating an execution context", &e))?;
        let result = py.detach(|| -> torchtrt::Result<Vec<f64>> {
            for (spec, b) in plan.inputs.iter().zip(&ins) {
                // SAFETY: `ins` and `outs` keep the arrays alive through the runs below,
                // which all complete before this closure returns.
                unsafe { ctx.bind_input(&spec.name, &buffer(b)) }?;
            }
            for ((name, _), b) in plan.outputs.iter().zip(&outs) {
                // SAFETY: as above.
                unsafe { ctx.bind_output(name, &buffer(b)) }?;
            }
            let mut times = Vec::with_capacity(iterations);
            for _ in 0..iterations {
                let start = std::time::Instant::now();
                match native {
                    Some(s) => {
                        // SAFETY: PyTorch's live stream of the engine's device.
                        unsafe { ctx.enqueue(s as *mut std::ffi::c_void) }?;
                        ctx.synchronize()?;
                    }
                    None => ctx.execute_bound()?,
                }
                times.push(start.elapsed().as_secs_f64());
            }
            Ok(times)
        });
        result.map_err(|e| raise("", &e))
    }

    /// The device the engine runs on: `cpu` or `cuda:N`.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    /// The inputs: dicts of `name`, `dtype` (torchtrt's name, `f32`…), `shape` (ints, or the
    /// names of dynamic dims), `min_shape`, `opt_shape`, `max_shape`.
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for i in &self.engine.plan().inputs {
            let d = PyDict::new(py);
            d.set_item("name", &i.name)?;
            d.set_item("dtype", i.dtype.name())?;
            let shape = i
                .dims
                .iter()
                .map(|dim| match dim {
                    Dim::Fixed(v) => int(py, *v),
                    Dim::Dynamic { name, .. } => text(py, name),
                })
                .collect::<Vec<_>>();
            d.set_item("shape", shape)?;
            for (key, pick) in [
                ("min_shape", (|a, _, _| a) as fn(i64, i64, i64) -> i64),
                ("opt_shape", |_, b, _| b),
                ("max_shape", |_, _, c| c),
            ] {
                let dims = i
                    .dims
                    .iter()
                    .map(|dim| dim_value(py, dim, pick))
                    .collect::<Vec<_>>();
                d.set_item(key, PyTuple::new(py, dims)?)?;
            }
            list.append(d)?;
        }
        Ok(list)
    }

    /// The outputs: dicts of `name`, `dtype` and `shape` (ints, or expressions of the
    /// inputs' dynamic dims as strings).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for o in self.engine.outputs() {
            let d = PyDict::new(py);
            d.set_item("name", &o.name)?;
            d.set_item("dtype", o.dtype.name())?;
            let shape = o
                .shape
                .iter()
                .map(|e| {
                    let s = e.to_string();
                    match s.parse::<i64>() {
                        Ok(v) => int(py, v),
                        Err(_) => text(py, &s),
                    }
                })
                .collect::<Vec<_>>();
            d.set_item("shape", shape)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The engine's bytes (the `.engine` file format).
    fn serialize<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes = py.detach(|| self.engine.serialize());
        PyBytes::new(py, &bytes)
    }

    /// Writes the engine to `path`.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.engine.save(&path))
            .map_err(|e| raise(&format!("writing {}", path.display()), &e))
    }

    /// A summary: layer and plugin-layer counts, layers per kind, precision and target.
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.engine.summary();
        let d = PyDict::new(py);
        d.set_item("layers", s.layers.len())?;
        let kinds = PyDict::new(py);
        for layer in &self.engine.plan().layers {
            let kind = layer.kind.op().kind();
            let count = kinds
                .get_item(kind)?
                .map_or(Ok(0), |c| c.extract::<usize>())?;
            kinds.set_item(kind, count + 1)?;
        }
        d.set_item("layer_kinds", kinds)?;
        d.set_item("plugin_layers", s.plugins.len())?;
        d.set_item("precision", self.engine.plan().precision.name())?;
        d.set_item("target", self.engine.target().to_string())?;
        Ok(d)
    }
}

/// Reads an engine from bytes (`label` names them in errors).
#[pyfunction]
#[pyo3(signature = (data, label = "engine bytes"))]
pub fn deserialize(py: Python<'_>, data: &[u8], label: &str) -> PyResult<PyEngine> {
    let engine = py
        .detach(|| torchtrt::Runtime::new().and_then(|r| r.deserialize(data)))
        .map_err(|e| raise(&format!("loading {label}"), &e))?;
    PyEngine::new(engine)
}

/// Reads an engine file.
#[pyfunction]
pub fn load_file(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyEngine> {
    let engine = py
        .detach(|| torchtrt::Runtime::new().and_then(|r| r.deserialize_file(&path)))
        .map_err(|e| raise(&format!("loading engine {}", path.display()), &e))?;
    PyEngine::new(engine)
}
