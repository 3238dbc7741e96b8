//! Reading one inference request: its inputs (checked against the engine: names, dtypes,
//! byte sizes, shapes within the profile) and the outputs it asks for.

use std::ffi::c_void;

use torchtrt::Engine;
use torchtrt::plugin_api::DType;

use crate::config::EngineIo;
use crate::dtype;
use crate::error::{BackendError, Result, c_str, check};
use crate::ffi::{Api, Input, Request, memory};

/// A contiguous piece of an input's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Address.
    pub ptr: u64,
    /// Bytes.
    pub len: usize,
    /// The GPU it is on; `None` for host memory.
    pub gpu: Option<i64>,
}

/// One input of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestInput {
    /// Element type (the engine's).
    pub dtype: DType,
    /// Shape, the batch dim included when the model batches.
    pub shape: Vec<usize>,
    /// The data, in order.
    pub chunks: Vec<Chunk>,
}

/// A request, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Inputs in the engine's order.
    pub inputs: Vec<RequestInput>,
    /// Indices of the engine outputs the request asks for.
    pub outputs: Vec<usize>,
    /// Its batch size (1 when the model does not batch).
    pub batch: usize,
}

impl Parsed {
    /// The dtypes and shapes of the inputs, in engine order.
    pub fn metas(&self) -> Vec<(DType, &[usize])> {
        self.inputs
            .iter()
            .map(|i| (i.dtype, i.shape.as_slice()))
            .collect()
    }

    /// Whether every input is one chunk (it can be bound where it lies).
    pub fn contiguous(&self) -> bool {
        self.inputs.iter().all(|i| i.chunks.len() == 1)
    }

    /// Whether all the data is in host memory.
    pub fn on_host(&self) -> bool {
        self.inputs
            .iter()
            .all(|i| i.chunks.iter().all(|c| c.gpu.is_none()))
    }
}

/// Reads and checks `request`. `gpu` is the device whose memory the instance prefers its
/// inputs in (`None`: host memory).
///
/// # Safety
/// `request` must be a live request Triton handed to the instance.
pub unsafe fn parse(
    api: &Api,
    request: *mut Request,
    engine: &Engine,
    io: &EngineIo,
    max_batch: i64,
    gpu: Option<i64>,
) -> Result<Parsed> {
    let mut count = 0u32;
    // SAFETY: a live request; Triton writes the count.
    check(unsafe { (api.TRITONBACKEND_RequestInputCount)(request, &mut count) })?;
    let mut inputs: Vec<Option<RequestInput>> = vec![None; io.inputs.len()];
    for index in 0..count {
        let mut input: *mut Input = std::ptr::null_mut();
        // SAFETY: `index` < the request's input count.
        check(unsafe { (api.TRITONBACKEND_RequestInputByIndex)(request, index, &mut input) })?;
        // SAFETY: a live input of the request.
        let (name, parsed) = unsafe { read_input(api, input, gpu) }?;
        let k = io
            .inputs
            .iter()
            .position(|i| i.name == name)
            .ok_or_else(|| {
                BackendError::invalid(format!(
                    "request input `{name}` is not an input of the model (inputs: {})",
                    names(io.inputs.iter().map(|i| i.name.as_str()))
                ))
            })?;
        if inputs[k].is_some() {
            return Err(BackendError::invalid(format!(
                "request input `{name}` is given twice"
            )));
        }
        inputs[k] = Some(parsed);
    }
    let inputs: Vec<RequestInput> = inputs
        .into_iter()
        .zip(&io.inputs)
        .map(|(i, spec)| {
            i.ok_or_else(|| {
                BackendError::invalid(format!("request input `{}` is missing", spec.name))
            })
        })
        .collect::<Result<_>>()?;
    for (input, spec) in inputs.iter().zip(&io.inputs) {
        if input.dtype != spec.dtype {
            return Err(BackendError::invalid(format!(
                "request input `{}` is {}, the model takes {}",
                spec.name,
                dtype::config_name(input.dtype),
                dtype::config_name(spec.dtype)
            )));
        }
    }
    let batch = if max_batch > 0 {
        let b = inputs[0].shape.first().copied().unwrap_or(0);
        if b == 0 || b as i64 > max_batch {
            return Err(BackendError::invalid(format!(
                "request batch {b} is outside 1..={max_batch} (max_batch_size)"
            )));
        }
        b
    } else {
        1
    };
    let parsed = Parsed {
        inputs,
        outputs: requested_outputs(api, request, io)?,
        batch,
    };
    engine
        .check_inputs(&parsed.metas())
        .map_err(|e| BackendError::invalid(format!("request shapes: {e}")))?;
    Ok(parsed)
}

/// # Safety
/// `input` must be a live input of a request.
unsafe fn read_input(
    api: &Api,
    input: *mut Input,
    gpu: Option<i64>,
) -> Result<(String, RequestInput)> {
    let mut name = std::ptr::null();
    let mut datatype = 0u32;
    let mut shape: *const i64 = std::ptr::null();
    let mut rank = 0u32;
    let mut byte_size = 0u64;
    let mut buffers = 0u32;
    // SAFETY: a live input; Triton writes every out-parameter.
    check(unsafe {
        (api.TRITONBACKEND_InputProperties)(
            input,
            &mut name,
            &mut datatype,
            &mut shape,
            &mut rank,
            &mut byte_size,
            &mut buffers,
        )
    })?;
    // SAFETY: the name Triton returned, valid while the request lives.
    let name = unsafe { c_str(name) };
    let dims: &[i64] = if rank == 0 || shape.is_null() {
        &[]
    } else {
        // SAFETY: Triton returned `rank` dims at `shape`.
        unsafe { std::slice::from_raw_parts(shape, rank as usize) }
    };
    let dtype = dtype::from_triton(datatype).ok_or_else(|| {
        BackendError::invalid(format!(
            "request input `{name}` has a data type torchtrt does not have (TRITONSERVER_DataType {datatype})"
        ))
    })?;
    let shape: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| BackendError::invalid(format!("request input `{name}` has shape {dims:?}")))?;
    let want = shape
        .iter()
        .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
        .ok_or_else(|| BackendError::invalid(format!("input `{name}`: {dims:?} overflows")))?;
    if want as u64 != byte_size {
        return Err(BackendError::invalid(format!(
            "request input `{name}` of shape {dims:?} {} needs {want} bytes, it has {byte_size}",
            dtype::config_name(dtype)
        )));
    }
    let mut chunks = Vec::with_capacity(buffers as usize);
    for index in 0..buffers {
        let mut ptr: *const c_void = std::ptr::null();
        let mut len = 0u64;
        let mut mem = if gpu.is_some() {
            memory::GPU
        } else {
            memory::CPU
        };
        let mut mem_id = gpu.unwrap_or(0);
        // SAFETY: `index` < the input's buffer count.
        check(unsafe {
            (api.TRITONBACKEND_InputBuffer)(input, index, &mut ptr, &mut len, &mut mem, &mut mem_id)
        })?;
        if len == 0 {
            continue;
        }
        chunks.push(Chunk {
            ptr: ptr as u64,
            len: len as usize,
            gpu: (mem == memory::GPU).then_some(mem_id),
        });
    }
    if chunks.is_empty() {
        chunks.push(Chunk {
            ptr: 0,
            len: 0,
            gpu: None,
        });
    }
    Ok((
        name,
        RequestInput {
            dtype,
            shape,
            chunks,
        },
    ))
}

fn requested_outputs(api: &Api, request: *mut Request, io: &EngineIo) -> Result<Vec<usize>> {
    let mut count = 0u32;
    // SAFETY: a live request.
    check(unsafe { (api.TRITONBACKEND_RequestOutputCount)(request, &mut count) })?;
    if count == 0 {
        return Ok((0..io.outputs.len()).collect());
    }
    let mut out = Vec::with_capacity(count as usize);
    for index in 0..count {
        let mut name = std::ptr::null();
        // SAFETY: `index` < the request's output count.
        check(unsafe { (api.TRITONBACKEND_RequestOutputName)(request, index, &mut name) })?;
        // SAFETY: the name Triton returned.
        let name = unsafe { c_str(name) };
        let k = io
            .outputs
            .iter()
            .position(|o| o.name == name)
            .ok_or_else(|| {
                BackendError::invalid(format!(
                    "requested output `{name}` is not an output of the model (outputs: {})",
                    names(io.outputs.iter().map(|o| o.name.as_str()))
                ))
            })?;
        out.push(k);
    }
    Ok(out)
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}
