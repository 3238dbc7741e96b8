//! `TtrtEngine`: deserialize, serialize, and query inputs and outputs.

use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use torchtrt_core::{Dim, Engine};
use torchtrt_plugin_api::abi::{TTRT_MAX_DIMS, TtrtStatus, TtrtTensorDesc};
use torchtrt_plugin_api::{DType, ShapeExpr, TensorFormat};

use crate::error::{CapiError, TTRT_ERROR_IO, guard};
use crate::ptr::{c_str, out_ptr, reference};
use crate::runtime::TtrtRuntime;

/// One input or output as the C API describes it.
pub(crate) struct IoEntry {
    pub name: String,
    pub c_name: CString,
    pub dtype: DType,
    pub shape: ShapeExpr,
    /// `(min, opt, max)` per dimension; inputs only.
    pub ranges: Vec<(i64, i64, i64)>,
    /// The dynamic dimension's symbol per dimension; inputs only.
    pub symbols: Vec<Option<String>>,
}

/// The engine's inputs and outputs, shared by the engine handle and its contexts.
pub(crate) struct IoTable {
    pub inputs: Vec<IoEntry>,
    pub outputs: Vec<IoEntry>,
}

impl IoTable {
    fn index(entries: &[IoEntry], name: &str, kind: &str) -> Result<usize, CapiError> {
        entries.iter().position(|e| e.name == name).ok_or_else(|| {
            let known: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            CapiError::invalid(format!(
                "the engine has no {kind} `{name}` ({kind}s: {})",
                known.join(", ")
            ))
        })
    }

    pub fn input_index(&self, name: &str) -> Result<usize, CapiError> {
        IoTable::index(&self.inputs, name, "input")
    }

    pub fn output_index(&self, name: &str) -> Result<usize, CapiError> {
        IoTable::index(&self.outputs, name, "output")
    }
}

/// The object behind a `TtrtEngine*`.
pub struct TtrtEngine {
    pub(crate) engine: Engine,
    pub(crate) io: Arc<IoTable>,
}

fn entry(name: &str, dtype: DType, shape: ShapeExpr, dims: &[Dim]) -> Result<IoEntry, CapiError> {
    if shape.len() > TTRT_MAX_DIMS {
        return Err(CapiError::unsupported(format!(
            "`{name}` has rank {}; the C API handles at most {TTRT_MAX_DIMS} dimensions",
            shape.len()
        )));
    }
    let c_name = CString::new(name)
        .map_err(|_| CapiError::unsupported(format!("the tensor name {name:?} contains NUL")))?;
    Ok(IoEntry {
        name: name.to_string(),
        c_name,
        dtype,
        shape,
        ranges: dims.iter().map(Dim::range).collect(),
        symbols: dims
            .iter()
            .map(|d| match d {
                Dim::Dynamic { name, .. } => Some(name.clone()),
                Dim::Fixed(_) => None,
            })
            .collect(),
    })
}

impl TtrtEngine {
    /// Wraps an engine for the C API; fails for a tensor name with NUL or a rank above
    /// `TTRT_MAX_DIMS`.
    pub fn new(engine: Engine) -> Result<TtrtEngine, CapiError> {
        let plan = engine.plan();
        let inputs = plan
            .inputs
            .iter()
            .map(|i| entry(&i.name, i.dtype, i.shape(), &i.dims))
            .collect::<Result<_, _>>()?;
        let outputs = engine
            .outputs()
            .into_iter()
            .map(|o| entry(&o.name, o.dtype, o.shape, &[]))
            .collect::<Result<_, _>>()?;
        Ok(TtrtEngine {
            engine,
            io: Arc::new(IoTable { inputs, outputs }),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// A `TtrtTensorDesc` of `dtype` and `dims` (at most `TTRT_MAX_DIMS`).
pub(crate) fn desc(dtype: DType, dims: impl ExactSizeIterator<Item = i64>) -> TtrtTensorDesc {
    let mut d = TtrtTensorDesc {
        dtype: dtype as i32,
        format: TensorFormat::Linear as i32,
        nb_dims: dims.len() as i32,
        reserved: 0,
        dims: [0; TTRT_MAX_DIMS],
    };
    for (slot, v) in d.dims.iter_mut().zip(dims) {
        *slot = v;
    }
    d
}

/// Hands a wrapped engine to C through `out`.
pub fn engine_out(out: &mut *mut TtrtEngine, engine: Engine) -> Result<(), CapiError> {
    *out = Box::into_raw(Box::new(TtrtEngine::new(engine)?));
    Ok(())
}

/// Reads an engine from `size` bytes at `data`.
///
/// # Safety
/// `data` is NULL or readable for `size` bytes; other pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_deserialize(
    runtime: *mut TtrtRuntime,
    data: *const c_void,
    size: usize,
    out: *mut *mut TtrtEngine,
) -> TtrtStatus {
    guard("ttrt_engine_deserialize", || {
        // SAFETY: the caller's contract.
        let (runtime, out) = unsafe { (reference(runtime, "runtime")?, out_ptr(out, "out")?) };
        if data.is_null() {
            return Err(CapiError::invalid("`data` is NULL"));
        }
        // SAFETY: non-NULL and readable for `size` bytes by the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
        engine_out(out, runtime.loader().deserialize(bytes)?)
    })
}

/// Reads an engine from the file at `path`.
///
/// # Safety
/// Pointers NULL or valid as in `torchtrt_runtime.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_deserialize_file(
    runtime: *mut TtrtRuntime,
    path: *const c_char,
    out: *mut *mut TtrtEngine,
) -> TtrtStatus {
    guard("ttrt_engine_deserialize_file", || {
        // SAFETY: the caller's contract.
        let (runtime, path, out) = unsafe {
            (
                reference(runtime, "runtime")?,
                c_str(path, "path")?,
                out_ptr(out, "out")?,
            )
        };
        let engine = runtime.loader().deserialize_file(path).map_err(|e| {
            let mut e = CapiError::from(e);
            if e.status != TTRT_ERROR_IO {
                e.message = format!("{path}: {}", e.message);
            }
            e
        })?;
        engine_out(out, engine)
    })
}

/// Destroys an engine; NULL is ignored. Its contexts stay usable.
///
/// # Safety
/// `engine` is NULL or came from this library and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_destroy(engine: *mut TtrtEngine) {
    if !engine.is_null() {
        guard("ttrt_engine_destroy", || {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(engine) });
            Ok(())
        });
    }
}

/// Serializes `engine` into a new buffer freed with `ttrt_bytes_free`.
///
/// # Safety
/// Pointers NULL or valid as in `torchtrt_runtime.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_serialize(
    engine: *const TtrtEngine,
    data: *mut *mut c_void,
    size: *mut usize,
) -> TtrtStatus {
    guard("ttrt_engine_serialize", || {
        // SAFETY: the caller's contract.
        let (engine, data, size) = unsafe {
            (
                reference(engine, "engine")?,
                out_ptr(data, "data")?,
                out_ptr(size, "size")?,
            )
        };
        let bytes = engine.engine.serialize().into_boxed_slice();
        *size = bytes.len();
        *data = Box::into_raw(bytes).cast::<c_void>();
        Ok(())
    })
}

/// Frees a buffer from `ttrt_engine_serialize`; NULL is ignored.
///
/// # Safety
/// `data` and `size` are NULL or exactly what `ttrt_engine_serialize` returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_bytes_free(data: *mut c_void, size: usize) {
    if !data.is_null() {
        let slice = std::ptr::slice_from_raw_parts_mut(data.cast::<u8>(), size);
        // SAFETY: the caller's contract: a boxed slice of `size` bytes from this library.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Writes the serialized engine to `path`.
///
/// # Safety
/// Pointers NULL or valid as in `torchtrt_runtime.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_save(
    engine: *const TtrtEngine,
    path: *const c_char,
) -> TtrtStatus {
    guard("ttrt_engine_save", || {
        // SAFETY: the caller's contract.
        let (engine, path) = unsafe { (reference(engine, "engine")?, c_str(path, "path")?) };
        engine.engine.save(path)?;
        Ok(())
    })
}

fn count(engine: *const TtrtEngine, out: *mut i32, outputs: bool) -> Result<(), CapiError> {
    // SAFETY: the exported callers' contract.
    let (engine, out) = unsafe { (reference(engine, "engine")?, out_ptr(out, "count")?) };
    let n = if outputs {
        engine.io.outputs.len()
    } else {
        engine.io.inputs.len()
    };
    *out = n as i32;
    Ok(())
}

/// Sets `*count` to the number of inputs.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_num_inputs(
    engine: *const TtrtEngine,
    count_out: *mut i32,
) -> TtrtStatus {
    guard("ttrt_engine_num_inputs", || count(engine, count_out, false))
}

/// Sets `*count` to the number of outputs.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_num_outputs(
    engine: *const TtrtEngine,
    count_out: *mut i32,
) -> TtrtStatus {
    guard("ttrt_engine_num_outputs", || count(engine, count_out, true))
}

fn at<'a>(entries: &'a [IoEntry], index: i32, kind: &str) -> Result<&'a IoEntry, CapiError> {
    usize::try_from(index)
        .ok()
        .and_then(|i| entries.get(i))
        .ok_or_else(|| {
            CapiError::invalid(format!(
                "{kind} index {index} is out of range (the engine has {} {kind}s)",
                entries.len()
            ))
        })
}

fn with_entry(
    engine: *const TtrtEngine,
    index: i32,
    outputs: bool,
    f: impl FnOnce(&IoEntry) -> Result<(), CapiError>,
) -> Result<(), CapiError> {
    // SAFETY: the exported callers' contract.
    let engine = unsafe { reference(engine, "engine") }?;
    if outputs {
        f(at(&engine.io.outputs, index, "output")?)
    } else {
        f(at(&engine.io.inputs, index, "input")?)
    }
}

fn name_of(
    engine: *const TtrtEngine,
    index: i32,
    name: *mut *const c_char,
    outputs: bool,
) -> Result<(), CapiError> {
    // SAFETY: the exported callers' contract.
    let name = unsafe { out_ptr(name, "name") }?;
    with_entry(engine, index, outputs, |e| {
        *name = e.c_name.as_ptr();
        Ok(())
    })
}

/// Sets `*name` to the name of input `index` (owned by the engine).
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_input_name(
    engine: *const TtrtEngine,
    index: i32,
    name: *mut *const c_char,
) -> TtrtStatus {
    guard("ttrt_engine_input_name", || {
        name_of(engine, index, name, false)
    })
}

/// Sets `*name` to the name of output `index` (owned by the engine).
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_output_name(
    engine: *const TtrtEngine,
    index: i32,
    name: *mut *const c_char,
) -> TtrtStatus {
    guard("ttrt_engine_output_name", || {
        name_of(engine, index, name, true)
    })
}

fn index_of(
    engine: *const TtrtEngine,
    name: *const c_char,
    index: *mut i32,
    outputs: bool,
) -> Result<(), CapiError> {
    // SAFETY: the exported callers' contract.
    let (engine, name, index) = unsafe {
        (
            reference(engine, "engine")?,
            c_str(name, "name")?,
            out_ptr(index, "index")?,
        )
    };
    let i = if outputs {
        engine.io.output_index(name)?
    } else {
        engine.io.input_index(name)?
    };
    *index = i as i32;
    Ok(())
}

/// Sets `*index` to the index of the input called `name`.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_input_index(
    engine: *const TtrtEngine,
    name: *const c_char,
    index: *mut i32,
) -> TtrtStatus {
    guard("ttrt_engine_input_index", || {
        index_of(engine, name, index, false)
    })
}

/// Sets `*index` to the index of the output called `name`.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_output_index(
    engine: *const TtrtEngine,
    name: *const c_char,
    index: *mut i32,
) -> TtrtStatus {
    guard("ttrt_engine_output_index", || {
        index_of(engine, name, index, true)
    })
}

fn symbolic_desc(e: &IoEntry) -> TtrtTensorDesc {
    desc(e.dtype, e.shape.iter().map(|d| d.as_const().unwrap_or(-1)))
}

/// Writes the dtype and dims of input `index` (-1 for dynamic dims).
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_input_desc(
    engine: *const TtrtEngine,
    index: i32,
    out: *mut TtrtTensorDesc,
) -> TtrtStatus {
    guard("ttrt_engine_input_desc", || {
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "desc") }?;
        with_entry(engine, index, false, |e| {
            *out = symbolic_desc(e);
            Ok(())
        })
    })
}

/// Writes the dtype and dims of output `index` (-1 for dims known only at run time).
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_output_desc(
    engine: *const TtrtEngine,
    index: i32,
    out: *mut TtrtTensorDesc,
) -> TtrtStatus {
    guard("ttrt_engine_output_desc", || {
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "desc") }?;
        with_entry(engine, index, true, |e| {
            *out = symbolic_desc(e);
            Ok(())
        })
    })
}

/// Writes the min / opt / max shapes input `index` accepts; each pointer may be NULL.
///
/// # Safety
/// Pointers NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_engine_input_profile(
    engine: *const TtrtEngine,
    index: i32,
    min: *mut TtrtTensorDesc,
    opt: *mut TtrtTensorDesc,
    max: *mut TtrtTensorDesc,
) -> TtrtStatus {
    guard("ttrt_engine_input_profile", || {
        with_entry(engine, index, false, |e| {
            for (p, which) in [(min, 0), (opt, 1), (max, 2)] {
                // SAFETY: the caller's contract: NULL or writable.
                if let Some(p) = unsafe { p.as_mut() } {
                    let dims = e.ranges.iter().map(|&(lo, mid, hi)| [lo, mid, hi][which]);
                    *p = desc(e.dtype, dims);
                }
            }
            Ok(())
        })
    })
}
