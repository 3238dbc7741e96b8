//! A Rust [`NetworkBuilder`] as the C table `TtrtNetworkBuilder` handed to a library's
//! `convert`: one trampoline per member, each checking its arguments and catching panics.

use std::ffi::{c_char, c_void};

use super::desc;
use super::ext_types::{TTRT_CONVERTER_ABI_VERSION, TtrtNetworkBuilder, TtrtTensorHandle};
use super::fields::read_fields;
use super::ptr;
use super::status::guard;
use super::types::{TtrtErrorBuf, TtrtField, TtrtStatus, TtrtTensorDesc};
use crate::converter::{BinaryOp, NetworkBuilder, TensorHandle, UnaryOp};
use crate::dtype::DType;
use crate::error::{PluginError, PluginResult};
use crate::plugin::PluginKey;

/// The state behind a host table: the builder, and the outputs the library set.
pub(crate) struct HostBuilder<'a> {
    net: &'a mut dyn NetworkBuilder,
    pub(crate) outputs: Vec<Option<TensorHandle>>,
}

impl<'a> HostBuilder<'a> {
    /// Wraps `net` for a node of `num_outputs` outputs.
    pub(crate) fn new(net: &'a mut dyn NetworkBuilder, num_outputs: usize) -> HostBuilder<'a> {
        HostBuilder {
            net,
            outputs: vec![None; num_outputs],
        }
    }

    /// The C table over `self`; valid while `self` is neither moved nor dropped.
    pub(crate) fn table(&mut self) -> TtrtNetworkBuilder {
        TtrtNetworkBuilder {
            abi_version: TTRT_CONVERTER_ABI_VERSION,
            size: u32::try_from(size_of::<TtrtNetworkBuilder>()).unwrap_or(u32::MAX),
            ctx: std::ptr::from_mut(self).cast(),
            tensor_desc: Some(tensor_desc),
            tensor_value: Some(tensor_value),
            add_constant: Some(add_constant),
            add_binary: Some(add_binary),
            add_unary: Some(add_unary),
            add_matmul: Some(add_matmul),
            add_reshape: Some(add_reshape),
            add_transpose: Some(add_transpose),
            add_concat: Some(add_concat),
            add_cast: Some(add_cast),
            add_plugin: Some(add_plugin),
            set_output: Some(set_output),
        }
    }
}

fn invalid(e: String) -> PluginError {
    PluginError::InvalidInput(e)
}

/// # Safety
/// `ctx` is the `ctx` of a table made by [`HostBuilder::table`] whose builder is alive and
/// not otherwise borrowed during the call.
unsafe fn host<'b>(ctx: *mut c_void) -> PluginResult<&'b mut HostBuilder<'b>> {
    // SAFETY: by the caller's promise.
    unsafe { ctx.cast::<HostBuilder<'b>>().as_mut() }
        .ok_or_else(|| invalid("network builder context is NULL".into()))
}

/// Writes `h` to `out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn put(out: *mut TtrtTensorHandle, h: TensorHandle) -> PluginResult<()> {
    if out.is_null() {
        return Err(invalid("output handle pointer is NULL".into()));
    }
    // SAFETY: non-NULL and writable by the caller's promise.
    unsafe { out.write(h.0) };
    Ok(())
}

/// Runs `f` on the builder behind `ctx` and writes the handle it returns to `out`.
///
/// # Safety
/// As for [`host`] and [`put`]; `err` is NULL or a valid error buffer.
unsafe fn add(
    ctx: *mut c_void,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
    f: impl FnOnce(&mut dyn NetworkBuilder) -> PluginResult<TensorHandle>,
) -> TtrtStatus {
    let body = || {
        // SAFETY: forwarded from the caller.
        let h = f(unsafe { host(ctx) }?.net)?;
        // SAFETY: forwarded from the caller.
        unsafe { put(out, h) }
    };
    // SAFETY: forwarded from the caller.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn tensor_desc(
    ctx: *mut c_void,
    t: TtrtTensorHandle,
    out: *mut TtrtTensorDesc,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the library passes the table's own context.
        let d = unsafe { host(ctx) }?.net.tensor_desc(TensorHandle(t))?;
        let raw = desc::to_raw(&d).map_err(invalid)?;
        if out.is_null() {
            return Err(invalid("tensor_desc: output pointer is NULL".into()));
        }
        // SAFETY: non-NULL; the library passes a writable description.
        unsafe { out.write(raw) };
        Ok(())
    };
    // SAFETY: the library passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn tensor_value(
    ctx: *mut c_void,
    t: TtrtTensorHandle,
    data: *mut *const c_void,
    nbytes: *mut usize,
) -> i32 {
    let body = || -> Option<()> {
        // SAFETY: the library passes the table's own context.
        let h = unsafe { host(ctx) }.ok()?;
        let bytes = h.net.tensor_value(TensorHandle(t))?;
        if data.is_null() || nbytes.is_null() {
            return None;
        }
        // SAFETY: non-NULL; the library passes writable pointers.
        unsafe {
            data.write(bytes.as_ptr().cast());
            nbytes.write(bytes.len());
        }
        Some(())
    };
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .ok()
        .flatten();
    i32::from(found.is_some())
}

unsafe extern "C" fn add_constant(
    ctx: *mut c_void,
    d: *const TtrtTensorDesc,
    data: *const c_void,
    nbytes: usize,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            let d = d
                .as_ref()
                .ok_or_else(|| invalid("add_constant: description is NULL".into()))?;
            let d = desc::from_raw(d).map_err(invalid)?;
            let bytes = ptr::slice(data.cast::<u8>(), nbytes, "constant data").map_err(invalid)?;
            net.add_constant(&d, bytes)
        })
    }
}

unsafe extern "C" fn add_binary(
    ctx: *mut c_void,
    op: i32,
    a: TtrtTensorHandle,
    b: TtrtTensorHandle,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            let op = BinaryOp::from_raw(op)
                .ok_or_else(|| invalid(format!("add_binary: unknown operation {op}")))?;
            net.add_binary(op, TensorHandle(a), TensorHandle(b))
        })
    }
}

unsafe extern "C" fn add_unary(
    ctx: *mut c_void,
    op: i32,
    x: TtrtTensorHandle,
    alpha: f32,
    beta: f32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            let op = UnaryOp::from_raw(op, alpha, beta)
                .ok_or_else(|| invalid(format!("add_unary: unknown operation {op}")))?;
            net.add_unary(op, TensorHandle(x))
        })
    }
}

unsafe extern "C" fn add_matmul(
    ctx: *mut c_void,
    a: TtrtTensorHandle,
    b: TtrtTensorHandle,
    transpose_a: i32,
    transpose_b: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            net.add_matmul(
                TensorHandle(a),
                TensorHandle(b),
                transpose_a != 0,
                transpose_b != 0,
            )
        })
    }
}

unsafe extern "C" fn add_reshape(
    ctx: *mut c_void,
    x: TtrtTensorHandle,
    dims: *const i64,
    nb_dims: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            let n = ptr::count(nb_dims, "reshape dims").map_err(invalid)?;
            let dims = ptr::slice(dims, n, "reshape dims").map_err(invalid)?;
            net.add_reshape(TensorHandle(x), dims)
        })
    }
}

unsafe extern "C" fn add_transpose(
    ctx: *mut c_void,
    x: TtrtTensorHandle,
    perm: *const i32,
    nb_perm: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            let n = ptr::count(nb_perm, "permutation").map_err(invalid)?;
            let perm = ptr::slice(perm, n, "permutation").map_err(invalid)?;
            let perm = perm
                .iter()
                .map(|&p| usize::try_from(p).map_err(|_| invalid(format!("permutation entry {p}"))))
                .collect::<PluginResult<Vec<_>>>()?;
            net.add_transpose(TensorHandle(x), &perm)
        })
    }
}

/// # Safety
/// A non-NULL `inputs` points to `nb` handles.
unsafe fn handles(
    inputs: *const TtrtTensorHandle,
    nb: i32,
    what: &str,
) -> PluginResult<Vec<TensorHandle>> {
    let n = ptr::count(nb, what).map_err(invalid)?;
    // SAFETY: by the caller's promise.
    let raw = unsafe { ptr::slice(inputs, n, what) }.map_err(invalid)?;
    Ok(raw.iter().map(|&h| TensorHandle(h)).collect())
}

unsafe extern "C" fn add_concat(
    ctx: *mut c_void,
    inputs: *const TtrtTensorHandle,
    nb_inputs: i32,
    axis: i64,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            net.add_concat(&handles(inputs, nb_inputs, "concat inputs")?, axis)
        })
    }
}

unsafe extern "C" fn add_cast(
    ctx: *mut c_void,
    x: TtrtTensorHandle,
    dtype: i32,
    out: *mut TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the library passes its arguments as the header prescribes.
    unsafe {
        add(ctx, out, err, |net| {
            let to = DType::from_raw(dtype)
                .ok_or_else(|| invalid(format!("add_cast: unknown dtype {dtype}")))?;
            net.add_cast(TensorHandle(x), to)
        })
    }
}

#[allow(clippy::too_many_arguments, reason = "mirrors the C signature")]
unsafe extern "C" fn add_plugin(
    ctx: *mut c_void,
    plugin_namespace: *const c_char,
    name: *const c_char,
    version: *const c_char,
    fields: *const TtrtField,
    nb_fields: i32,
    inputs: *const TtrtTensorHandle,
    nb_inputs: i32,
    outputs: *mut TtrtTensorHandle,
    capacity: i32,
    nb_outputs: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the library passes NUL-terminated strings, `nb_fields` fields and
        // `nb_inputs` handles.
        let (key, fields, ins) = unsafe {
            let s = |p, what| ptr::string(p, what).map_err(invalid);
            let key = PluginKey::new(
                &s(plugin_namespace, "plugin namespace")?,
                &s(name, "plugin name")?,
                &s(version, "plugin version")?,
            );
            let fields = read_fields(fields, nb_fields)
                .map_err(|e| invalid(format!("plugin {key}: {e}")))?;
            (key, fields, handles(inputs, nb_inputs, "plugin inputs")?)
        };
        // SAFETY: the library passes the table's own context.
        let outs = unsafe { host(ctx) }?.net.add_plugin(&key, &fields, &ins)?;
        let raw: Vec<i64> = outs.iter().map(|h| h.0).collect();
        let cap = ptr::count(capacity, "output capacity").map_err(invalid)?;
        if raw.len() > cap || nb_outputs.is_null() {
            return Err(invalid(format!(
                "plugin {key} has {} outputs; room was given for {cap}",
                raw.len()
            )));
        }
        // SAFETY: room for `capacity >= raw.len()` handles, and a writable count.
        unsafe {
            let n = ptr::to_count(raw.len(), "outputs").map_err(invalid)?;
            ptr::write_all(outputs, n, &raw, "plugin outputs").map_err(invalid)?;
            nb_outputs.write(n);
        }
        Ok(())
    };
    // SAFETY: the library passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn set_output(
    ctx: *mut c_void,
    index: i32,
    t: TtrtTensorHandle,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the library passes the table's own context.
        let h = unsafe { host(ctx) }?;
        let n = h.outputs.len();
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| h.outputs.get_mut(i))
            .ok_or_else(|| {
                invalid(format!(
                    "set_output: index {index}; the node has {n} outputs"
                ))
            })?;
        h.net.tensor_desc(TensorHandle(t))?;
        *slot = Some(TensorHandle(t));
        Ok(())
    };
    // SAFETY: the library passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}
