//! `TtrtContext`: input shapes, output shape queries and execution, on host buffers, and
//! for engines built for a GPU also on device buffers with a stream (`ttrt_context_enqueue`).

use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::Arc;

use torchtrt_core::{ExecutionContext, IoBuffer, MemoryKind, Target};
use torchtrt_plugin_api::DeviceKind;
use torchtrt_plugin_api::abi::{TTRT_MAX_DIMS, TtrtStatus, TtrtTensorDesc};

use crate::engine::{IoEntry, IoTable, TtrtEngine, desc};
use crate::error::{CapiError, TTRT_ERROR_BUFFER_TOO_SMALL, guard};
use crate::ptr::{c_str, out_ptr, reference};
use crate::tensor::{TtrtTensor, resolve};

/// The object behind a `TtrtContext*`: one execution context whatever the engine's device,
/// with the input shapes set for output shape queries.
pub struct TtrtContext {
    ctx: ExecutionContext,
    io: Arc<IoTable>,
    /// The CUDA ordinal of the engine's device; `None` for a CPU engine.
    ordinal: Option<i32>,
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

    /// Refuses a stream for an engine that runs on the CPU.
    fn refuse_stream(&self, stream: *mut c_void) -> Result<(), CapiError> {
        if self.ordinal.is_none() && !stream.is_null() {
            return Err(CapiError::unsupported(
                "a stream was given, but the engine runs on the CPU: pass NULL (a CUDA engine \
                 takes a stream)",
            ));
        }
        Ok(())
    }

    /// The memory a caller's tensor `t` is in (its device already checked by `resolve`),
    /// checked against the engine's device ordinal.
    fn memory(&self, t: &TtrtTensor, what: &str) -> Result<MemoryKind, CapiError> {
        match self.ordinal {
            Some(ordinal) if DeviceKind::from_raw(t.device) == Some(DeviceKind::Cuda) => {
                if t.device_ordinal != ordinal {
                    return Err(CapiError::invalid(format!(
                        "{what}: the engine runs on cuda:{ordinal}, the buffer is on cuda:{}",
                        t.device_ordinal
                    )));
                }
                Ok(MemoryKind::Device)
            }
            _ => Ok(MemoryKind::Host),
        }
    }

    /// Binds the caller's inputs and outputs (checked: names, shapes, sizes, devices),
    /// writing each output's shape; outputs not given are computed and dropped.
    fn bind(&mut self, inputs: &[TtrtTensor], outputs: &mut [TtrtTensor]) -> Result<(), CapiError> {
        self.ctx.unbind();
        self.output_shapes.iter_mut().for_each(|s| *s = None);
        let mut given = vec![false; self.io.inputs.len()];
        for (pos, t) in inputs.iter().enumerate() {
            // SAFETY: the exported caller's contract for `name`.
            let i = unsafe { resolve(t, &self.io.inputs, "input", pos, self.ordinal.is_some()) }?;
            let entry = &self.io.inputs[i];
            if std::mem::replace(&mut given[i], true) {
                return Err(CapiError::invalid(format!(
                    "input `{}` is given twice",
                    entry.name
                )));
            }
            let memory = self.memory(t, &format!("input `{}`", entry.name))?;
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
            if needed > 0 && t.data.is_null() {
                return Err(CapiError::invalid(format!(
                    "input `{}`: `data` is NULL",
                    entry.name
                )));
            }
            let buffer = IoBuffer {
                memory,
                ptr: t.data as u64,
                dtype: entry.dtype,
                shape,
            };
            // SAFETY: the exported caller's contract: `data` holds `size` bytes of that
            // memory until the run (or the queued work) completes.
            unsafe { self.ctx.bind_input(&entry.name, &buffer) }?;
            self.input_shapes[i] = Some(dims.to_vec());
        }
        if let Some(missing) = given.iter().position(|g| !g) {
            return Err(CapiError::invalid(format!(
                "input `{}` is not given",
                self.io.inputs[missing].name
            )));
        }
        let shapes = self.ctx.bound_output_shapes()?;
        let mut short = None;
        let mut seen = vec![false; self.io.outputs.len()];
        for (pos, out) in outputs.iter_mut().enumerate() {
            // SAFETY: the exported caller's contract for `name`.
            let i =
                unsafe { resolve(out, &self.io.outputs, "output", pos, self.ordinal.is_some()) }?;
            let entry = &self.io.outputs[i];
            if std::mem::replace(&mut seen[i], true) {
                return Err(CapiError::invalid(format!(
                    "output `{}` is given twice",
                    entry.name
                )));
            }
            let memory = self.memory(out, &format!("output `{}`", entry.name))?;
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
                short.get_or_insert_with(|| {
                    format!(
                        "output `{}` of shape {shape:?} needs {needed} bytes, the buffer has {}",
                        entry.name, out.size
                    )
                });
                continue;
            }
            if needed > 0 && out.data.is_null() {
                return Err(CapiError::invalid(format!(
                    "output `{}`: `data` is NULL but `size` is {}",
                    entry.name, out.size
                )));
            }
            let buffer = IoBuffer {
                memory,
                ptr: out.data as u64,
                dtype: entry.dtype,
                shape: shape.clone(),
            };
            // SAFETY: the exported caller's contract: `data` holds at least `needed`
            // writable bytes of that memory until the run (or the queued work) completes.
            unsafe { self.ctx.bind_output(&entry.name, &buffer) }?;
        }
        for (slot, shape) in self.output_shapes.iter_mut().zip(&shapes) {
            *slot = Some(shape.iter().map(|&d| d as i64).collect());
        }
        match short {
            Some(message) => Err(CapiError::new(TTRT_ERROR_BUFFER_TOO_SMALL, message)),
            None => Ok(()),
        }
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
        let ordinal = match engine.engine.target() {
            Target::Cpu => None,
            Target::Cuda { .. } => Some(device_ordinal(&engine.engine)?),
        };
        let context = TtrtContext {
            ctx: engine.engine.create_context()?,
            ordinal,
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
        context.refuse_stream(stream)?;
        context.bind(inputs, outputs)?;
        if stream.is_null() {
            context.ctx.execute_bound()?;
        } else {
            // SAFETY: the caller's contract: a live stream of the engine's device.
            unsafe { context.ctx.enqueue(stream) }?;
            context.ctx.synchronize()?;
        }
        Ok(())
    })
}

/// The ordinal of the CUDA device whose backend prepared `engine` (`cuda:N`).
fn device_ordinal(engine: &torchtrt_core::Engine) -> Result<i32, CapiError> {
    let name = engine.backend().name();
    name.strip_prefix("cuda:")
        .and_then(|n| n.parse::<i32>().ok())
        .ok_or_else(|| {
            CapiError::unsupported(format!("the engine's device {name} is not a CUDA device"))
        })
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
        context.refuse_stream(stream)?;
        context.bind(inputs, outputs)?;
        // SAFETY: the caller's contract: buffers and stream valid until the work completes.
        unsafe { context.ctx.enqueue(stream) }?;
        Ok(())
    })
}
