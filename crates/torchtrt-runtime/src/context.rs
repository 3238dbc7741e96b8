//! `TtrtContext`: input shapes, output shape queries and execution, on host buffers, and
//! for engines built for a GPU also on device buffers with a stream (`ttrt_context_enqueue`).

use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use torchtrt_core::{ExecutionContext, Target, Tensor};
use torchtrt_cuda::{CudaDevice, CudaExecutionContext, DeviceIo, Stream};
use torchtrt_plugin_api::DeviceKind;
use torchtrt_plugin_api::abi::{TTRT_MAX_DIMS, TtrtStatus, TtrtTensorDesc};

use crate::engine::{IoEntry, IoTable, TtrtEngine, desc};
use crate::error::{CapiError, TTRT_ERROR_BUFFER_TOO_SMALL, guard};
use crate::ptr::{c_str, out_ptr, reference};
use crate::tensor::{TtrtTensor, resolve};

/// The object behind a `TtrtContext*`.
pub struct TtrtContext {
    ctx: ExecutionContext,
    cuda: Option<(CudaExecutionContext, CudaDevice)>,
    io: Arc<IoTable>,
    input_shapes: Vec<Option<Vec<i64>>>,
    output_shapes: Vec<Option<Vec<i64>>>,
}

fn check_shape(entry: &IoEntry, dims: &[i64]) -> Result<(), CapiError> {
    let fmt = |d: &[i64]| {
        let s: Vec<String> = d.iter().map(i64::to_string).collect();
        format!("[{}]", s.join(","))
    };
    if dims.len() != entry.ranges.len() {
        return Err(CapiError::invalid(format!(
            "input `{}` has rank {}, shape {} given",
            entry.name,
            entry.ranges.len(),
            fmt(dims)
        )));
    }
    for (axis, (&v, &(min, _, max))) in dims.iter().zip(&entry.ranges).enumerate() {
        if v < min || v > max {
            return Err(CapiError::invalid(format!(
                "input `{}`: dimension {axis} is {v}, the engine accepts [{min}, {max}] (shape {} given)",
                entry.name,
                fmt(dims)
            )));
        }
    }
    Ok(())
}

fn read_dims<'a>(dims: *const i64, nb_dims: i32, what: &str) -> Result<&'a [i64], CapiError> {
    let n = usize::try_from(nb_dims)
        .ok()
        .filter(|&n| n <= TTRT_MAX_DIMS)
        .ok_or_else(|| {
            CapiError::invalid(format!(
                "{what}: nb_dims {nb_dims} is outside [0, {TTRT_MAX_DIMS}]"
            ))
        })?;
    if n == 0 {
        return Ok(&[]);
    }
    if dims.is_null() {
        return Err(CapiError::invalid(format!("{what}: `dims` is NULL")));
    }
    // SAFETY: the exported caller's contract: `dims` holds `nb_dims` values.
    Ok(unsafe { std::slice::from_raw_parts(dims, n) })
}

impl TtrtContext {
    fn output_dims(&self, index: usize) -> Vec<i64> {
        if let Some(d) = &self.output_shapes[index] {
            return d.clone();
        }
        let mut bound: HashMap<&str, i64> = HashMap::new();
        for (entry, shape) in self.io.inputs.iter().zip(&self.input_shapes) {
            if let Some(shape) = shape {
                for (sym, &v) in entry.symbols.iter().zip(shape) {
                    if let Some(sym) = sym {
                        bound.insert(sym, v);
                    }
                }
            }
        }
        self.io.outputs[index]
            .shape
            .iter()
            .map(|d| d.eval(&|s| bound.get(s).copied()).unwrap_or(-1))
            .collect()
    }

    /// Checks and copies the inputs into tensors in the engine's input order.
    fn bind_inputs(&mut self, inputs: &[TtrtTensor]) -> Result<Vec<Tensor>, CapiError> {
        let mut bound: Vec<Option<Tensor>> = vec![None; self.io.inputs.len()];
        for (pos, t) in inputs.iter().enumerate() {
            // SAFETY: the exported caller's contract for `name`.
            let i = unsafe { resolve(t, &self.io.inputs, "input", pos, false) }?;
            let entry = &self.io.inputs[i];
            if bound[i].is_some() {
                return Err(CapiError::invalid(format!(
                    "input `{}` is given twice",
                    entry.name
                )));
            }
            let dims = read_dims(
                t.dims.as_ptr(),
                t.nb_dims,
                &format!("input `{}`", entry.name),
            )?;
            check_shape(entry, dims)?;
            let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let needed = shape
                .iter()
                .try_fold(entry.dtype.size(), |a, &d| a.checked_mul(d))
                .ok_or_else(|| {
                    CapiError::invalid(format!("input `{}`: the size overflows", entry.name))
                })?;
            if t.size != needed {
                return Err(CapiError::invalid(format!(
                    "input `{}`: the buffer has {} bytes, a {} tensor of shape {:?} needs {needed}",
                    entry.name, t.size, entry.dtype, dims
                )));
            }
            let bytes: &[u8] = if needed == 0 {
                &[]
            } else if t.data.is_null() {
                return Err(CapiError::invalid(format!(
                    "input `{}`: `data` is NULL",
                    entry.name
                )));
            } else {
                // SAFETY: non-NULL and readable for `size` bytes by the caller's contract.
                unsafe { std::slice::from_raw_parts(t.data.cast::<u8>(), needed) }
            };
            bound[i] = Some(Tensor::from_bytes(entry.dtype, &shape, bytes)?);
            self.input_shapes[i] = Some(dims.to_vec());
        }
        bound
            .into_iter()
            .zip(&self.io.inputs)
            .map(|(t, e)| {
                t.ok_or_else(|| CapiError::invalid(format!("input `{}` is not given", e.name)))
            })
            .collect()
    }

    /// Checks the output bindings before anything runs; returns their engine indices.
    fn resolve_outputs(&self, outputs: &[TtrtTensor], cuda: bool) -> Result<Vec<usize>, CapiError> {
        let mut seen = vec![false; self.io.outputs.len()];
        let mut indices = Vec::with_capacity(outputs.len());
        for (pos, t) in outputs.iter().enumerate() {
            // SAFETY: the exported caller's contract for `name`.
            let i = unsafe { resolve(t, &self.io.outputs, "output", pos, cuda) }?;
            let name = &self.io.outputs[i].name;
            if std::mem::replace(&mut seen[i], true) {
                return Err(CapiError::invalid(format!(
                    "output `{name}` is given twice"
                )));
            }
            if t.data.is_null() && t.size > 0 {
                return Err(CapiError::invalid(format!(
                    "output `{name}`: `data` is NULL but `size` is {}",
                    t.size
                )));
            }
            indices.push(i);
        }
        Ok(indices)
    }

    fn execute(
        &mut self,
        inputs: &[TtrtTensor],
        outputs: &mut [TtrtTensor],
    ) -> Result<(), CapiError> {
        let targets = self.resolve_outputs(outputs, false)?;
        self.output_shapes.iter_mut().for_each(|s| *s = None);
        let tensors = self.bind_inputs(inputs)?;
        let refs: Vec<&Tensor> = tensors.iter().collect();
        let results = match &mut self.cuda {
            Some((cuda, _)) => cuda.execute(&refs)?,
            None => self.ctx.execute(&refs)?,
        };
        for (slot, t) in self.output_shapes.iter_mut().zip(&results) {
            *slot = Some(t.shape().iter().map(|&d| d as i64).collect());
        }
        let mut short = None;
        for (out, &i) in outputs.iter_mut().zip(&targets) {
            let t = &results[i];
            let name = &self.io.outputs[i].name;
            if t.rank() > TTRT_MAX_DIMS {
                return Err(CapiError::unsupported(format!(
                    "output `{name}` has rank {}; the C API handles at most {TTRT_MAX_DIMS}",
                    t.rank()
                )));
            }
            out.nb_dims = t.rank() as i32;
            for (slot, &d) in out.dims.iter_mut().zip(t.shape()) {
                *slot = d as i64;
            }
            let bytes = t.bytes();
            if bytes.len() > out.size {
                short.get_or_insert_with(|| {
                    format!(
                        "output `{name}` of shape {:?} needs {} bytes, the buffer has {}",
                        t.shape(),
                        bytes.len(),
                        out.size
                    )
                });
                continue;
            }
            if !bytes.is_empty() {
                // SAFETY: checked non-NULL with `size` >= bytes.len() writable bytes by the
                // caller's contract; the source is our own tensor, disjoint from it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        out.data.cast::<u8>(),
                        bytes.len(),
                    )
                };
            }
        }
        match short {
            Some(message) => Err(CapiError::new(TTRT_ERROR_BUFFER_TOO_SMALL, message)),
            None => Ok(()),
        }
    }

    /// Queues the engine on `stream` over device buffers (CUDA engines only); with `wait`,
    /// waits for the stream before returning.
    fn enqueue(
        &mut self,
        inputs: &[TtrtTensor],
        outputs: &mut [TtrtTensor],
        stream: *mut c_void,
        wait: bool,
    ) -> Result<(), CapiError> {
        let Some((_, device)) = &self.cuda else {
            return Err(CapiError::unsupported(
                "the engine runs on the CPU: run it on host buffers with ttrt_context_execute",
            ));
        };
        let ordinal = device.ordinal() as i32;
        let on_device = |t: &TtrtTensor, what: &str| -> Result<(), CapiError> {
            if DeviceKind::from_raw(t.device) != Some(DeviceKind::Cuda)
                || t.device_ordinal != ordinal
            {
                return Err(CapiError::invalid(format!(
                    "{what}: the engine runs on cuda:{ordinal}; every buffer must be in its memory \
                     (device TTRT_DEVICE_CUDA, device_ordinal {ordinal})"
                )));
            }
            Ok(())
        };
        let mut ins: Vec<Option<DeviceIo>> = vec![None; self.io.inputs.len()];
        for (pos, t) in inputs.iter().enumerate() {
            // SAFETY: the exported caller's contract for `name`.
            let i = unsafe { resolve(t, &self.io.inputs, "input", pos, true) }?;
            let entry = &self.io.inputs[i];
            on_device(t, &format!("input `{}`", entry.name))?;
            if ins[i].is_some() {
                return Err(CapiError::invalid(format!(
                    "input `{}` is given twice",
                    entry.name
                )));
            }
            let dims = read_dims(
                t.dims.as_ptr(),
                t.nb_dims,
                &format!("input `{}`", entry.name),
            )?;
            check_shape(entry, dims)?;
            let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let needed = shape.iter().product::<usize>() * entry.dtype.size();
            if t.size != needed || (needed > 0 && t.data.is_null()) {
                return Err(CapiError::invalid(format!(
                    "input `{}`: the buffer has {} bytes at {:?}, a {} tensor of shape {dims:?} needs {needed}",
                    entry.name, t.size, t.data, entry.dtype
                )));
            }
            ins[i] = Some(DeviceIo {
                ptr: t.data as u64,
                dtype: entry.dtype,
                shape,
            });
            self.input_shapes[i] = Some(dims.to_vec());
        }
        let ins: Vec<DeviceIo> = ins
            .into_iter()
            .zip(&self.io.inputs)
            .map(|(t, e)| {
                t.ok_or_else(|| CapiError::invalid(format!("input `{}` is not given", e.name)))
            })
            .collect::<Result<_, _>>()?;
        let targets = self.resolve_outputs(outputs, true)?;
        let Some((cuda, device)) = &mut self.cuda else {
            unreachable!("checked above")
        };
        let described: Vec<(torchtrt_plugin_api::DType, &[usize])> =
            ins.iter().map(|t| (t.dtype, t.shape.as_slice())).collect();
        let shapes = cuda.output_shapes(&described)?;
        let mut outs: Vec<Option<DeviceIo>> = vec![None; shapes.len()];
        for (out, &i) in outputs.iter_mut().zip(&targets) {
            let entry = &self.io.outputs[i];
            on_device(out, &format!("output `{}`", entry.name))?;
            let shape = &shapes[i];
            if shape.len() > TTRT_MAX_DIMS {
                return Err(CapiError::unsupported(format!(
                    "output `{}` has rank {}; the C API handles at most {TTRT_MAX_DIMS}",
                    entry.name,
                    shape.len()
                )));
            }
            out.nb_dims = shape.len() as i32;
            for (slot, &d) in out.dims.iter_mut().zip(shape) {
                *slot = d as i64;
            }
            let needed = shape.iter().product::<usize>() * entry.dtype.size();
            if needed > out.size {
                return Err(CapiError::new(
                    TTRT_ERROR_BUFFER_TOO_SMALL,
                    format!(
                        "output `{}` of shape {shape:?} needs {needed} bytes, the buffer has {}",
                        entry.name, out.size
                    ),
                ));
            }
            outs[i] = Some(DeviceIo {
                ptr: out.data as u64,
                dtype: entry.dtype,
                shape: shape.clone(),
            });
        }
        let outs: Vec<DeviceIo> = outs
            .into_iter()
            .zip(&self.io.outputs)
            .map(|(t, e)| {
                t.ok_or_else(|| {
                    CapiError::invalid(format!(
                        "output `{}` is not given: on the device every output needs a buffer",
                        e.name
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        // SAFETY: the exported caller's contract: device buffers of `size` bytes on this
        // device, valid until the queued work completes, and a stream of its context.
        unsafe { cuda.enqueue(&ins, &outs, stream) }?;
        for (slot, shape) in self.output_shapes.iter_mut().zip(&shapes) {
            *slot = Some(shape.iter().map(|&d| d as i64).collect());
        }
        if wait {
            // SAFETY: as above.
            let stream = unsafe { Stream::from_raw(device, stream) };
            stream.synchronize().map_err(|e| {
                CapiError::from(torchtrt_core::Error::Execution {
                    layer: "stream".into(),
                    message: e.to_string(),
                })
            })?;
        }
        Ok(())
    }
}

/// Creates an execution context for `engine`; it keeps the engine alive.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_context_create(
    engine: *const TtrtEngine,
    out: *mut *mut TtrtContext,
) -> TtrtStatus {
    guard("ttrt_context_create", || {
        // SAFETY: the caller's contract.
        let (engine, out) = unsafe { (reference(engine, "engine")?, out_ptr(out, "out")?) };
        let cuda = cuda_context(&engine.engine)?;
        let context = TtrtContext {
            ctx: engine.engine.create_context(),
            cuda,
            io: engine.io.clone(),
            input_shapes: vec![None; engine.io.inputs.len()],
            output_shapes: vec![None; engine.io.outputs.len()],
        };
        *out = Box::into_raw(Box::new(context));
        Ok(())
    })
}

/// Destroys a context; NULL is ignored.
///
/// # Safety
/// `context` is NULL or came from `ttrt_context_create` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_context_destroy(context: *mut TtrtContext) {
    if !context.is_null() {
        guard("ttrt_context_destroy", || {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(context) });
            Ok(())
        });
    }
}

/// Fixes the shape of input `name` for output shape queries.
///
/// # Safety
/// `dims` is NULL or holds `nb_dims` values; other pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_context_set_input_shape(
    context: *mut TtrtContext,
    name: *const c_char,
    dims: *const i64,
    nb_dims: i32,
) -> TtrtStatus {
    guard("ttrt_context_set_input_shape", || {
        // SAFETY: the caller's contract.
        let (context, name) = unsafe { (out_ptr(context, "context")?, c_str(name, "name")?) };
        let index = context.io.input_index(name)?;
        let dims = read_dims(dims, nb_dims, &format!("input `{name}`"))?;
        check_shape(&context.io.inputs[index], dims)?;
        context.input_shapes[index] = Some(dims.to_vec());
        context.output_shapes.iter_mut().for_each(|s| *s = None);
        Ok(())
    })
}

/// Writes the shape of output `name` as far as it is known (-1 elsewhere).
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_context_output_desc(
    context: *const TtrtContext,
    name: *const c_char,
    out: *mut TtrtTensorDesc,
) -> TtrtStatus {
    guard("ttrt_context_output_desc", || {
        // SAFETY: the caller's contract.
        let (context, name, out) = unsafe {
            (
                reference(context, "context")?,
                c_str(name, "name")?,
                out_ptr(out, "desc")?,
            )
        };
        let index = context.io.output_index(name)?;
        let dims = context.output_dims(index);
        *out = desc(context.io.outputs[index].dtype, dims.into_iter());
        Ok(())
    })
}

/// Runs the engine on host buffers.
///
/// # Safety
/// `inputs` / `outputs` are NULL or hold `nb_inputs` / `nb_outputs` tensors whose `data`
/// is valid for `size` bytes; other pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_context_execute(
    context: *mut TtrtContext,
    inputs: *const TtrtTensor,
    nb_inputs: i32,
    outputs: *mut TtrtTensor,
    nb_outputs: i32,
    stream: *mut c_void,
) -> TtrtStatus {
    guard("ttrt_context_execute", || {
        // SAFETY: the caller's contract.
        let context = unsafe { out_ptr(context, "context") }?;
        // SAFETY: the caller's contract.
        let (inputs, outputs) = unsafe { tensor_arrays(inputs, nb_inputs, outputs, nb_outputs) }?;
        let on_device = inputs
            .iter()
            .chain(outputs.iter())
            .any(|t| DeviceKind::from_raw(t.device) == Some(DeviceKind::Cuda));
        if context.cuda.is_some() && on_device {
            return context.enqueue(inputs, outputs, stream, true);
        }
        if !stream.is_null() {
            return Err(CapiError::unsupported(
                "a stream was given, but the engine runs on host buffers here: pass NULL \
                 (a CUDA engine takes a stream with device buffers)",
            ));
        }
        context.execute(inputs, outputs)
    })
}

/// The CUDA context of an engine built for a GPU, on the device whose backend prepared it.
fn cuda_context(
    engine: &torchtrt_core::Engine,
) -> Result<Option<(CudaExecutionContext, CudaDevice)>, CapiError> {
    if !matches!(engine.target(), Target::Cuda { .. }) {
        return Ok(None);
    }
    let name = engine.backend().name();
    let backend = crate::cuda::cuda_backends()
        .into_iter()
        .find(|b| torchtrt_core::Backend::name(b.as_ref()) == name)
        .ok_or_else(|| {
            CapiError::unsupported(format!("the engine's device {name} is not available"))
        })?;
    let device = backend.cuda_device().clone();
    Ok(Some((CudaExecutionContext::new(engine, &device)?, device)))
}

/// The caller's tensor arrays, checked: counts non-negative, pointers non-NULL when a count
/// is positive.
///
/// # Safety
/// `inputs` / `outputs` are NULL or hold `nb_inputs` / `nb_outputs` tensors.
unsafe fn tensor_arrays<'a>(
    inputs: *const TtrtTensor,
    nb_inputs: i32,
    outputs: *mut TtrtTensor,
    nb_outputs: i32,
) -> Result<(&'a [TtrtTensor], &'a mut [TtrtTensor]), CapiError> {
    let count = |n: i32, what: &str, null: bool| -> Result<usize, CapiError> {
        let n = usize::try_from(n)
            .map_err(|_| CapiError::invalid(format!("`nb_{what}` is negative ({n})")))?;
        if n > 0 && null {
            return Err(CapiError::invalid(format!(
                "`{what}` is NULL but `nb_{what}` is {n}"
            )));
        }
        Ok(n)
    };
    let n_in = count(nb_inputs, "inputs", inputs.is_null())?;
    let n_out = count(nb_outputs, "outputs", outputs.is_null())?;
    let inputs: &[TtrtTensor] = if n_in == 0 {
        &[]
    } else {
        // SAFETY: non-NULL and holding `nb_inputs` tensors by the caller's contract.
        unsafe { std::slice::from_raw_parts(inputs, n_in) }
    };
    let outputs: &mut [TtrtTensor] = if n_out == 0 {
        &mut []
    } else {
        // SAFETY: non-NULL and holding `nb_outputs` tensors by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(outputs, n_out) }
    };
    Ok((inputs, outputs))
}

/// Queues the engine on `stream` (a `CUstream`, or NULL for the legacy default stream)
/// over device buffers, for engines built for a GPU: every input and output is in the
/// memory of the engine's device; outputs get their shapes written. Returns once the work
/// is queued (TensorRT's `enqueueV3`).
///
/// # Safety
/// As `ttrt_context_execute`; every `data` is a device address valid for `size` bytes
/// until the queued work completes, and `stream` belongs to the device's primary context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_context_enqueue(
    context: *mut TtrtContext,
    inputs: *const TtrtTensor,
    nb_inputs: i32,
    outputs: *mut TtrtTensor,
    nb_outputs: i32,
    stream: *mut c_void,
) -> TtrtStatus {
    guard("ttrt_context_enqueue", || {
        // SAFETY: the caller's contract.
        let context = unsafe { out_ptr(context, "context") }?;
        // SAFETY: the caller's contract.
        let (inputs, outputs) = unsafe { tensor_arrays(inputs, nb_inputs, outputs, nb_outputs) }?;
        context.enqueue(inputs, outputs, stream, false)
    })
}
