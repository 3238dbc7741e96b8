//! A model instance: one execution context (with, on a GPU, its own CUDA stream and memory
//! pool) that runs the requests Triton hands it — alone and in place when a request's data
//! is contiguous, or concatenated along the batch dim with its neighbours (dynamic
//! batching) and split back into one response each.

use std::ffi::{CString, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use torchtrt::plugin_api::DType;
use torchtrt::{Engine, ExecutionContext, IoBuffer, MemoryKind, Tensor};

use crate::batch::{self, Item};
use crate::dtype;
use crate::error::{BackendError, Result, check, log};
use crate::ffi::{self, Api, ModelInstance, Output, Request, Response, memory};
use crate::model::ModelState;
use crate::request::{self, Parsed};

/// The state Triton keeps for one instance.
pub struct InstanceState {
    /// The instance's name, for messages.
    pub name: String,
    gpu: Option<i64>,
    engine: Engine,
    ctx: ExecutionContext,
    /// The model's [`crate::config::EngineIo::sized`]: requests then run staged, outputs
    /// bound at their upper bound and answered with the shapes the run reports.
    sized: bool,
    stage_in: Vec<Tensor>,
    stage_out: Vec<Tensor>,
}

impl InstanceState {
    /// An instance of `model` on `device` (`cpu`, `cuda:N`; `gpu` is `Some(N)` for the
    /// latter) with its own execution context.
    pub fn new(name: String, model: &ModelState, device: &str, gpu: Option<i64>) -> Result<Self> {
        let engine = model.engine(device)?;
        let ctx = engine
            .create_context()
            .map_err(|e| BackendError::from(e).context(format!("instance {name} on {device}")))?;
        Ok(InstanceState {
            name,
            gpu,
            engine,
            ctx,
            sized: model.io.sized,
            stage_in: Vec::new(),
            stage_out: Vec::new(),
        })
    }

    /// Answers every request (an error response for each one that fails), reports the
    /// statistics and releases the requests.
    pub fn execute(
        &mut self,
        api: &Api,
        model: &ModelState,
        instance: *mut ModelInstance,
        requests: &[*mut Request],
    ) {
        let exec_start = now_ns();
        let mut ok = vec![false; requests.len()];
        let parsed: Vec<Option<Parsed>> = requests
            .iter()
            .map(|&r| {
                // SAFETY: a request Triton handed to this instance.
                let p = unsafe {
                    request::parse(api, r, &self.engine, &model.io, model.max_batch, self.gpu)
                };
                p.map_err(|e| send_error(api, r, e)).ok()
            })
            .collect();
        let items: Vec<Option<Item>> = parsed
            .iter()
            .map(|p| {
                p.as_ref().map(|p| Item {
                    batch: p.batch,
                    rest: p
                        .inputs
                        .iter()
                        .map(|i| i.shape.get(1..).unwrap_or(&[]).to_vec())
                        .collect(),
                    host: p.on_host(),
                })
            })
            .collect();
        let max_batch = usize::try_from(model.max_batch).unwrap_or(0);
        let compute_start = now_ns();
        let mut rows = 0u64;
        for group in batch::groups(&items, max_batch) {
            let members: Vec<(*mut Request, &Parsed)> = group
                .iter()
                .filter_map(|&i| parsed[i].as_ref().map(|p| (requests[i], p)))
                .collect();
            let run = catch_unwind(AssertUnwindSafe(|| match members.as_slice() {
                [(r, p)] if p.contiguous() && !self.sized => {
                    self.run_direct(api, *r, p).map(|()| vec![true])
                }
                _ => self.run_staged(api, &members, max_batch > 0),
            }));
            let result = run.unwrap_or_else(|_| {
                Err(BackendError::internal(format!(
                    "instance {}: the run panicked",
                    self.name
                )))
            });
            match result {
                Ok(sent) => {
                    for (&i, s) in group.iter().zip(sent) {
                        ok[i] = s;
                        rows += parsed[i].as_ref().map_or(0, |p| p.batch as u64);
                    }
                }
                Err(e) => {
                    for &i in &group {
                        send_error(api, requests[i], e.clone());
                    }
                }
            }
        }
        let exec_end = now_ns();
        for (&r, &success) in requests.iter().zip(&ok) {
            // SAFETY: the instance and request Triton handed over; the request is released
            // once, after its response was sent.
            unsafe {
                warn(check((api.TRITONBACKEND_ModelInstanceReportStatistics)(
                    instance,
                    r,
                    success,
                    exec_start,
                    compute_start,
                    exec_end,
                    exec_end,
                )));
                warn(check((api.TRITONBACKEND_RequestRelease)(
                    r,
                    ffi::REQUEST_RELEASE_ALL,
                )));
            }
        }
        if rows > 0 {
            // SAFETY: the instance Triton handed over.
            warn(check(unsafe {
                (api.TRITONBACKEND_ModelInstanceReportBatchStatistics)(
                    instance,
                    rows,
                    exec_start,
                    compute_start,
                    exec_end,
                    exec_end,
                )
            }));
        }
    }

    /// Runs one request whose inputs are each one buffer: bound where they lie, outputs
    /// written straight into the response's buffers.
    fn run_direct(&mut self, api: &Api, req: *mut Request, p: &Parsed) -> Result<()> {
        self.ctx.unbind();
        let plan_inputs: Vec<String> = self.engine.inputs().into_iter().map(|i| i.name).collect();
        for (input, name) in p.inputs.iter().zip(&plan_inputs) {
            let chunk = input.chunks[0];
            let buffer = IoBuffer {
                memory: if chunk.gpu.is_some() {
                    MemoryKind::Device
                } else {
                    MemoryKind::Host
                },
                ptr: chunk.ptr,
                dtype: input.dtype,
                shape: input.shape.clone(),
            };
            // SAFETY: the request's buffer holds the input's bytes (its size was checked)
            // and outlives the run: the request is released after it.
            unsafe { self.ctx.bind_input(name, &buffer) }?;
        }
        let shapes = self.ctx.output_shapes(&p.metas())?;
        let response = new_response(api, req)?;
        let run = (|| {
            let outputs = self.engine.outputs();
            for &k in &p.outputs {
                let (ptr, memory) = add_output(
                    api,
                    response,
                    &outputs[k].name,
                    outputs[k].dtype,
                    &shapes[k],
                    self.gpu,
                )?;
                let buffer = IoBuffer {
                    memory,
                    ptr,
                    dtype: outputs[k].dtype,
                    shape: shapes[k].clone(),
                };
                // SAFETY: the response's buffer has the output's size and lives until the
                // response is sent, after the run.
                unsafe { self.ctx.bind_output(&outputs[k].name, &buffer) }?;
            }
            self.ctx.execute_bound()?;
            Ok(())
        })();
        self.ctx.unbind();
        match run {
            Ok(()) => send(api, response, None),
            Err(e) => {
                // SAFETY: the response was created above and not sent.
                warn(check(unsafe {
                    (api.TRITONBACKEND_ResponseDelete)(response)
                }));
                Err(e)
            }
        }
    }

    /// Runs requests together: their inputs copied one after the other into host buffers
    /// (along the batch dim when `batched`), the outputs split back into one response each.
    /// `Err` when the run fails (no response sent); else whether each request's response
    /// carries its outputs.
    fn run_staged(
        &mut self,
        api: &Api,
        members: &[(*mut Request, &Parsed)],
        batched: bool,
    ) -> Result<Vec<bool>> {
        let (offsets, rows) =
            batch::offsets(&members.iter().map(|m| m.1.batch).collect::<Vec<_>>());
        let first = members
            .first()
            .ok_or_else(|| BackendError::internal("an empty batch"))?
            .1;
        self.ctx.unbind();
        let names: Vec<String> = self.engine.inputs().into_iter().map(|i| i.name).collect();
        self.stage_in.truncate(names.len());
        for (k, name) in names.iter().enumerate() {
            let mut shape = first.inputs[k].shape.clone();
            if batched && let Some(b) = shape.first_mut() {
                *b = rows;
            }
            let dtype = first.inputs[k].dtype;
            let staged = staging(&mut self.stage_in, k, dtype, &shape);
            let bytes = staged.bytes_mut();
            let mut at = 0;
            for (_, p) in members {
                for chunk in &p.inputs[k].chunks {
                    if chunk.gpu.is_some() {
                        return Err(BackendError::unsupported(format!(
                            "input `{name}` is in GPU memory in several buffers"
                        )));
                    }
                    let end = at + chunk.len;
                    let dst = bytes.get_mut(at..end).ok_or_else(|| {
                        BackendError::invalid(format!(
                            "input `{name}` has more bytes than its shape"
                        ))
                    })?;
                    // SAFETY: a host buffer of the request of `chunk.len` bytes.
                    let src =
                        unsafe { std::slice::from_raw_parts(chunk.ptr as *const u8, chunk.len) };
                    dst.copy_from_slice(src);
                    at = end;
                }
            }
            let buffer = IoBuffer::host(bytes.as_mut_ptr(), dtype, &shape);
            // SAFETY: the staging tensor is held by the instance and untouched during the run.
            unsafe { self.ctx.bind_input(name, &buffer) }?;
        }
        let metas: Vec<(DType, Vec<usize>)> = self
            .stage_in
            .iter()
            .map(|t| (t.dtype(), t.shape().to_vec()))
            .collect();
        let metas: Vec<(DType, &[usize])> = metas.iter().map(|(d, s)| (*d, s.as_slice())).collect();
        let shapes = self.ctx.output_shapes(&metas)?;
        let outputs = self.engine.outputs();
        self.stage_out.truncate(outputs.len());
        for (k, out) in outputs.iter().enumerate() {
            if batched && shapes[k].first() != Some(&rows) {
                return Err(BackendError::internal(format!(
                    "output `{}` has shape {:?} for a batch of {rows}",
                    out.name, shapes[k]
                )));
            }
            let staged = staging(&mut self.stage_out, k, out.dtype, &shapes[k]);
            let buffer = IoBuffer::host(staged.bytes_mut().as_mut_ptr(), out.dtype, &shapes[k]);
            // SAFETY: the staging tensor is held by the instance and untouched during the run.
            unsafe { self.ctx.bind_output(&out.name, &buffer) }?;
        }
        let run = self.ctx.execute_bound();
        self.ctx.unbind();
        run?;
        let actual = self.ctx.last_output_shapes().to_vec();
        let mut sent = Vec::with_capacity(members.len());
        for ((req, p), offset) in members.iter().zip(offsets) {
            let result = self.respond_slice(api, *req, p, offset, batched, &actual);
            if let Err(e) = &result {
                send_error(api, *req, e.clone());
            }
            sent.push(result.is_ok());
        }
        Ok(sent)
    }

    /// Sends one request its rows of the staged outputs; alone in its run, the outputs of
    /// the shapes the run reported (`actual`: a length the run decided is at most the
    /// staged one, its elements first in the buffer).
    fn respond_slice(
        &self,
        api: &Api,
        req: *mut Request,
        p: &Parsed,
        offset: usize,
        batched: bool,
        actual: &[Vec<usize>],
    ) -> Result<()> {
        let response = new_response(api, req)?;
        let outputs = self.engine.outputs();
        let filled = (|| {
            for &k in &p.outputs {
                let full = &self.stage_out[k];
                let (shape, start, len) = if batched {
                    let mut shape = full.shape().to_vec();
                    let row = full.bytes().len() / shape[0].max(1);
                    shape[0] = p.batch;
                    (shape, offset * row, p.batch * row)
                } else {
                    let Some(shape) = actual.get(k) else {
                        return Err(BackendError::internal(format!(
                            "output `{}`: the run reported no shape",
                            outputs[k].name
                        )));
                    };
                    let len = shape.iter().product::<usize>() * full.dtype().size();
                    if len > full.bytes().len() {
                        return Err(BackendError::internal(format!(
                            "output `{}`: the run reported shape {shape:?}, beyond its buffer \
                             of {:?}",
                            outputs[k].name,
                            full.shape()
                        )));
                    }
                    (shape.clone(), 0, len)
                };
                let (ptr, memory) =
                    add_output(api, response, &outputs[k].name, full.dtype(), &shape, None)?;
                if memory != MemoryKind::Host {
                    return Err(BackendError::internal(format!(
                        "output `{}`: Triton gave GPU memory for a host output",
                        outputs[k].name
                    )));
                }
                if len > 0 {
                    // SAFETY: the response's host buffer holds `len` bytes.
                    let dst = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
                    dst.copy_from_slice(&full.bytes()[start..start + len]);
                }
            }
            Ok(())
        })();
        match filled {
            Ok(()) => send(api, response, None),
            Err(e) => {
                // SAFETY: the response was created above and not sent.
                warn(check(unsafe {
                    (api.TRITONBACKEND_ResponseDelete)(response)
                }));
                Err(e)
            }
        }
    }
}

/// Staging tensor `k` of `dtype` and `shape`, reused when it has them already.
fn staging<'a>(
    stage: &'a mut Vec<Tensor>,
    k: usize,
    dtype: DType,
    shape: &[usize],
) -> &'a mut Tensor {
    let fits = stage
        .get(k)
        .is_some_and(|t| t.dtype() == dtype && t.shape() == shape);
    if !fits {
        let fresh = Tensor::zeros(dtype, shape);
        if k < stage.len() {
            stage[k] = fresh;
        } else {
            stage.push(fresh);
        }
    }
    &mut stage[k]
}

fn new_response(api: &Api, req: *mut Request) -> Result<*mut Response> {
    let mut response = std::ptr::null_mut();
    // SAFETY: a live request.
    check(unsafe { (api.TRITONBACKEND_ResponseNew)(&mut response, req) })?;
    Ok(response)
}

/// Adds output `name` to `response` and returns its buffer: on GPU `gpu` when given (Triton
/// may still answer with host memory), else in host memory.
fn add_output(
    api: &Api,
    response: *mut Response,
    name: &str,
    dtype: DType,
    shape: &[usize],
    gpu: Option<i64>,
) -> Result<(u64, MemoryKind)> {
    let cname =
        CString::new(name).map_err(|_| BackendError::internal("an output name with NUL"))?;
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let bytes = shape.iter().product::<usize>() * dtype.size();
    let mut output: *mut Output = std::ptr::null_mut();
    // SAFETY: a live response; Triton copies the name and shape.
    check(unsafe {
        (api.TRITONBACKEND_ResponseOutput)(
            response,
            &mut output,
            cname.as_ptr(),
            dtype::to_triton(dtype),
            dims.as_ptr(),
            dims.len() as u32,
        )
    })?;
    let mut ptr: *mut c_void = std::ptr::null_mut();
    let mut mem = if gpu.is_some() {
        memory::GPU
    } else {
        memory::CPU
    };
    let mut mem_id = gpu.unwrap_or(0);
    // SAFETY: the output just added; Triton writes the buffer and where it is.
    check(unsafe {
        (api.TRITONBACKEND_OutputBuffer)(output, &mut ptr, bytes as u64, &mut mem, &mut mem_id)
    })?;
    let memory = if mem == memory::GPU {
        MemoryKind::Device
    } else {
        MemoryKind::Host
    };
    Ok((ptr as u64, memory))
}

/// Sends `response` as the request's final one, with `error` if any.
fn send(api: &Api, response: *mut Response, error: Option<BackendError>) -> Result<()> {
    let raw = error.map_or(std::ptr::null_mut(), BackendError::into_raw);
    // SAFETY: a response not sent before; Triton owns it afterwards, the error stays ours.
    let result = check(unsafe {
        (api.TRITONBACKEND_ResponseSend)(response, ffi::RESPONSE_COMPLETE_FINAL, raw)
    });
    if !raw.is_null() {
        // SAFETY: the error created above, no longer used.
        unsafe { (api.TRITONSERVER_ErrorDelete)(raw) };
    }
    result
}

/// Answers `req` with `error`.
fn send_error(api: &Api, req: *mut Request, error: BackendError) {
    match new_response(api, req) {
        Ok(response) => warn(send(api, response, Some(error))),
        Err(e) => log(
            ffi::log::ERROR,
            &format!("cannot answer a request with `{error}`: {e}"),
        ),
    }
}

fn warn(result: Result<()>) {
    if let Err(e) = result {
        log(ffi::log::WARN, &e.message);
    }
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

unsafe extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// Nanoseconds of the monotonic clock, the one Triton's statistics use.
fn now_ns() -> u64 {
    const CLOCK_MONOTONIC: i32 = 1;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: a valid clock id and out-parameter.
    if unsafe { clock_gettime(CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}
