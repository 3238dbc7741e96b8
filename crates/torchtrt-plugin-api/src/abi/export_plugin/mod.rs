//! A Rust plugin behind a C `TtrtPlugin` table: one trampoline per table function, each
//! catching panics and turning errors into a status and a message.

pub(in crate::abi) mod launch;

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use crate::abi::desc;
use crate::abi::dims::BuilderDims;
use crate::abi::fields::RawFields;
use crate::abi::ptr;
use crate::abi::shape_values;
use crate::abi::status::guard;
use crate::abi::types::{
    TTRT_TACTIC_NAME_LEN, TtrtErrorBuf, TtrtExprBuilder, TtrtField, TtrtLaunch, TtrtPlugin,
    TtrtPortDesc, TtrtShapeExpr, TtrtShapeValues, TtrtSizedOutput, TtrtStatus, TtrtTactic,
    TtrtTensorDesc,
};
use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, PortDesc, TensorDesc};
use crate::error::{PluginError, PluginResult};
use crate::plugin::Plugin;

/// A plugin and its table; `raw.self_` points at this value.
struct ExportedPlugin {
    raw: TtrtPlugin,
    plugin: RwLock<Box<dyn Plugin>>,
    serialized: Mutex<Option<RawFields>>,
}

/// Moves `plugin` behind a new table, owned by the host until it calls `destroy`.
pub(crate) fn export_plugin(plugin: Box<dyn Plugin>) -> *mut TtrtPlugin {
    let p = Box::into_raw(Box::new(ExportedPlugin {
        raw: TtrtPlugin {
            self_: std::ptr::null_mut(),
            num_outputs: Some(num_outputs),
            output_dtypes: Some(output_dtypes),
            output_shapes: Some(output_shapes),
            supports: Some(supports),
            configure: Some(configure),
            workspace_size: Some(workspace_size),
            enqueue: Some(enqueue),
            serialize_fields: Some(serialize_fields),
            clone: Some(clone),
            destroy: Some(destroy),
            shape_inputs: Some(shape_inputs),
            output_shapes_of: Some(output_shapes_of),
            sized_outputs: Some(sized_outputs),
            tactics: Some(tactics),
            set_tactic: Some(set_tactic),
            aliased_input: Some(aliased_input),
        },
        plugin: RwLock::new(plugin),
        serialized: Mutex::new(None),
    }));
    // SAFETY: `p` is a fresh allocation owned by no one else yet.
    unsafe {
        (*p).raw.self_ = p.cast::<c_void>();
        &raw mut (*p).raw
    }
}

pub(super) fn invalid(e: String) -> PluginError {
    PluginError::InvalidInput(e)
}

/// # Safety
/// `this` is NULL or the `self_` of a table made by [`export_plugin`], not yet destroyed.
unsafe fn this<'a>(this: *mut c_void) -> PluginResult<&'a ExportedPlugin> {
    // SAFETY: by the caller's promise.
    unsafe { this.cast::<ExportedPlugin>().cast_const().as_ref() }
        .ok_or_else(|| invalid("plugin is NULL".into()))
}

impl ExportedPlugin {
    fn read(&self) -> PluginResult<RwLockReadGuard<'_, Box<dyn Plugin>>> {
        self.plugin
            .read()
            .map_err(|_| PluginError::Execution("plugin is unusable after a panic".into()))
    }
}

unsafe extern "C" fn num_outputs(
    this_: *mut c_void,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let n = unsafe { this(this_) }?.read()?.num_outputs();
        let n = ptr::to_count(n, "outputs").map_err(invalid)?;
        // SAFETY: the host passes room for one count.
        unsafe { ptr::write_all(nb, 1, &[n], "num_outputs result") }.map_err(invalid)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn output_dtypes(
    this_: *mut c_void,
    inputs: *const i32,
    nb_inputs: i32,
    outputs: *mut i32,
    nb_outputs: i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        let n = ptr::count(nb_inputs, "input dtypes").map_err(invalid)?;
        // SAFETY: the host passes `nb_inputs` dtypes.
        let raw = unsafe { ptr::slice(inputs, n, "input dtypes") }.map_err(invalid)?;
        let dtypes = raw
            .iter()
            .map(|&d| DType::from_raw(d).ok_or_else(|| invalid(format!("unknown input dtype {d}"))))
            .collect::<PluginResult<Vec<_>>>()?;
        // SAFETY: the host passes the table's own `self_`.
        let out = unsafe { this(this_) }?.read()?.output_dtypes(&dtypes)?;
        let out: Vec<i32> = out.iter().map(|&d| d as i32).collect();
        // SAFETY: the host passes room for `nb_outputs` dtypes.
        unsafe { ptr::write_all(outputs, nb_outputs, &out, "output dtypes") }.map_err(invalid)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn output_shapes(
    this_: *mut c_void,
    inputs: *const TtrtShapeExpr,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    builder: *const TtrtExprBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let plugin = unsafe { this(this_) }?;
        // SAFETY: the host passes its builder, `nb_inputs` shapes and room for `nb_outputs`.
        unsafe {
            shape_rule(builder, inputs, nb_inputs, outputs, nb_outputs, |shapes| {
                plugin.read()?.output_shapes(shapes)
            })
        }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

/// Writes `items` into the host's array of `capacity` entries at `out` and their number
/// into `nb`; `what` names them in errors.
///
/// # Safety
/// `out` has room for `capacity` entries and `nb` is NULL or writable, as the host promises.
unsafe fn write_list<T: Copy>(
    items: &[T],
    out: *mut T,
    capacity: i32,
    nb: *mut i32,
    what: &str,
) -> PluginResult<()> {
    let cap = ptr::count(capacity, what).map_err(invalid)?;
    if items.len() > cap {
        return Err(invalid(format!("{} {what}, room for {cap}", items.len())));
    }
    // SAFETY: the host passes room for `capacity` entries.
    let dst = unsafe { ptr::slice_mut(out, items.len(), what) }.map_err(invalid)?;
    dst.copy_from_slice(items);
    if nb.is_null() {
        return Err(invalid(format!("{what}: count pointer is NULL")));
    }
    // SAFETY: non-NULL; the host passes a writable count.
    unsafe { nb.write(ptr::to_count(items.len(), what).map_err(invalid)?) };
    Ok(())
}

unsafe extern "C" fn shape_inputs(
    this_: *mut c_void,
    indices: *mut i32,
    capacity: i32,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let plugin = unsafe { this(this_) }?;
        let found = plugin.read()?.shape_inputs();
        let raw = found
            .iter()
            .map(|&i| ptr::to_count(i, "shape input index"))
            .collect::<Result<Vec<i32>, _>>()
            .map_err(invalid)?;
        // SAFETY: the host's array and count, as the ABI promises.
        unsafe { write_list(&raw, indices, capacity, nb, "shape inputs") }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn sized_outputs(
    this_: *mut c_void,
    sized: *mut TtrtSizedOutput,
    capacity: i32,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let plugin = unsafe { this(this_) }?;
        let found = plugin.read()?.sized_outputs();
        let index = |i: usize| ptr::to_count(i, "sized output index").map_err(invalid);
        let raw = found
            .iter()
            .map(|s| {
                Ok(TtrtSizedOutput {
                    output: index(s.output)?,
                    axis: index(s.axis)?,
                    count: index(s.count)?,
                })
            })
            .collect::<PluginResult<Vec<_>>>()?;
        // SAFETY: the host's array and count, as the ABI promises.
        unsafe { write_list(&raw, sized, capacity, nb, "sized outputs") }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

#[allow(
    clippy::too_many_arguments,
    reason = "the C signature of TtrtOutputShapesOfFn"
)]
unsafe extern "C" fn output_shapes_of(
    this_: *mut c_void,
    inputs: *const TtrtShapeExpr,
    values: *const TtrtShapeValues,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    builder: *const TtrtExprBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let plugin = unsafe { this(this_) }?;
        let n = ptr::count(nb_inputs, "input shapes").map_err(invalid)?;
        // SAFETY: the host passes NULL or `nb_inputs` values.
        let values = unsafe { shape_values::from_raw(values, n) }.map_err(invalid)?;
        // SAFETY: the host passes its builder, `nb_inputs` shapes and room for `nb_outputs`.
        unsafe {
            shape_rule(builder, inputs, nb_inputs, outputs, nb_outputs, |shapes| {
                plugin.read()?.output_shapes_of(shapes, &values)
            })
        }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn supports(
    this_: *mut c_void,
    pos: i32,
    io: *const TtrtPortDesc,
    nb_io: i32,
    nb_inputs: i32,
    device: i32,
) -> i32 {
    let body = || -> Option<bool> {
        // SAFETY: the host passes `nb_io` ports.
        let (ports, pos, nb_inputs, device) =
            unsafe { port_query(pos, io, nb_io, nb_inputs, device) }?;
        // SAFETY: the host passes the table's own `self_`.
        let p = unsafe { this(this_) }.ok()?;
        Some(p.read().ok()?.supports(pos, &ports, nb_inputs, device))
    };
    let ok = catch_unwind(AssertUnwindSafe(body)).ok().flatten();
    i32::from(ok == Some(true))
}

/// The output shapes `rule` gives for the input shapes, through the host's expression
/// `builder`: the body of an exported plugin's or custom op's `output_shapes`.
///
/// # Safety
/// `builder` is the host's valid builder, `inputs` holds `nb_inputs` shapes and `outputs`
/// room for `nb_outputs`.
pub(in crate::abi) unsafe fn shape_rule(
    builder: *const TtrtExprBuilder,
    inputs: *const TtrtShapeExpr,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    rule: impl FnOnce(&[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>>,
) -> PluginResult<()> {
    // SAFETY: the host's builder is valid for this call.
    let mut dims = unsafe { BuilderDims::new(builder) }.map_err(invalid)?;
    let n = ptr::count(nb_inputs, "input shapes").map_err(invalid)?;
    // SAFETY: the host passes `nb_inputs` shapes.
    let raw = unsafe { ptr::slice(inputs, n, "input shapes") }.map_err(invalid)?;
    let shapes = raw
        .iter()
        .map(|s| dims.input_shape(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(invalid)?;
    let out = rule(&shapes)?
        .iter()
        .map(|s| dims.output_shape(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(PluginError::Execution)?;
    // SAFETY: the host passes room for `nb_outputs` shapes.
    unsafe { ptr::write_all(outputs, nb_outputs, &out, "output shapes") }.map_err(invalid)
}

/// The arguments of a `supports` query in Rust terms: the ports, the position (inside
/// them), the number of inputs and the device; `None` when any is malformed.
///
/// # Safety
/// `io` holds `nb_io` port descriptions.
pub(in crate::abi) unsafe fn port_query(
    pos: i32,
    io: *const TtrtPortDesc,
    nb_io: i32,
    nb_inputs: i32,
    device: i32,
) -> Option<(Vec<PortDesc>, usize, usize, DeviceKind)> {
    let n = ptr::count(nb_io, "ports").ok()?;
    // SAFETY: the host passes `nb_io` ports.
    let raw = unsafe { ptr::slice(io, n, "ports") }.ok()?;
    let ports = raw
        .iter()
        .map(desc::port_from_raw)
        .collect::<Option<Vec<_>>>()?;
    let pos = usize::try_from(pos).ok().filter(|&p| p < ports.len())?;
    let nb_inputs = usize::try_from(nb_inputs).ok()?;
    Some((ports, pos, nb_inputs, DeviceKind::from_raw(device)?))
}

/// # Safety
/// Each pointer must hold its count of descriptions.
pub(super) unsafe fn descs(
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
) -> PluginResult<(Vec<TensorDesc>, Vec<TensorDesc>)> {
    // SAFETY: forwarded from the caller.
    let ins = unsafe { desc::from_raw_all(inputs, nb_inputs, "input") }.map_err(invalid)?;
    // SAFETY: forwarded from the caller.
    let outs = unsafe { desc::from_raw_all(outputs, nb_outputs, "output") }.map_err(invalid)?;
    Ok((ins, outs))
}

#[allow(
    clippy::too_many_arguments,
    reason = "the C signature of TtrtTacticsFn"
)]
unsafe extern "C" fn tactics(
    this_: *mut c_void,
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
    device: i32,
    list: *mut TtrtTactic,
    capacity: i32,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes its counts of descriptions.
        let (ins, outs) = unsafe { descs(inputs, nb_inputs, outputs, nb_outputs) }?;
        let device = DeviceKind::from_raw(device)
            .ok_or_else(|| invalid(format!("tactics: unknown device {device}")))?;
        // SAFETY: the host passes the table's own `self_`.
        let plugin = unsafe { this(this_) }?;
        let found = plugin.read()?.tactics(&ins, &outs, device);
        let raw = found
            .iter()
            .map(|t| {
                let bytes = t.name.as_bytes();
                if bytes.len() >= TTRT_TACTIC_NAME_LEN || bytes.contains(&0) {
                    return Err(invalid(format!(
                        "tactic {} name `{}`: at most {} bytes, no NUL",
                        t.id,
                        t.name,
                        TTRT_TACTIC_NAME_LEN - 1
                    )));
                }
                let mut raw = TtrtTactic {
                    id: t.id,
                    ..TtrtTactic::default()
                };
                for (d, &b) in raw.name.iter_mut().zip(bytes) {
                    *d = b as std::ffi::c_char;
                }
                Ok(raw)
            })
            .collect::<PluginResult<Vec<_>>>()?;
        // SAFETY: the host's array and count, as the ABI promises.
        unsafe { write_list(&raw, list, capacity, nb, "tactics") }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn set_tactic(
    this_: *mut c_void,
    tactic: u32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let p = unsafe { this(this_) }?;
        let mut plugin = p
            .plugin
            .write()
            .map_err(|_| PluginError::Execution("plugin is unusable after a panic".into()))?;
        plugin.set_tactic(tactic)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn aliased_input(this_: *mut c_void, output: i32) -> i32 {
    let body = || -> Option<usize> {
        let output = usize::try_from(output).ok()?;
        // SAFETY: the host passes the table's own `self_`.
        let p = unsafe { this(this_) }.ok()?;
        p.read().ok()?.aliased_input(output)
    };
    catch_unwind(AssertUnwindSafe(body))
        .ok()
        .flatten()
        .and_then(|i| i32::try_from(i).ok())
        .unwrap_or(-1)
}

unsafe extern "C" fn configure(
    this_: *mut c_void,
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes its counts of descriptions.
        let (ins, outs) = unsafe { descs(inputs, nb_inputs, outputs, nb_outputs) }?;
        // SAFETY: the host passes the table's own `self_`.
        let p = unsafe { this(this_) }?;
        let mut plugin = p
            .plugin
            .write()
            .map_err(|_| PluginError::Execution("plugin is unusable after a panic".into()))?;
        plugin.configure(&ins, &outs)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn workspace_size(
    this_: *mut c_void,
    inputs: *const TtrtTensorDesc,
    nb_inputs: i32,
    outputs: *const TtrtTensorDesc,
    nb_outputs: i32,
    size: *mut usize,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes its counts of descriptions.
        let (ins, outs) = unsafe { descs(inputs, nb_inputs, outputs, nb_outputs) }?;
        // SAFETY: the host passes the table's own `self_`.
        let n = unsafe { this(this_) }?.read()?.workspace_size(&ins, &outs);
        // SAFETY: the host passes room for one size.
        unsafe { ptr::write_all(size, 1, &[n], "workspace size") }.map_err(invalid)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn enqueue(
    this_: *mut c_void,
    launch: *const TtrtLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes a valid launch or NULL.
        let l = unsafe { launch.as_ref() }.ok_or_else(|| invalid("launch is NULL".into()))?;
        // SAFETY: the host passes the table's own `self_`.
        let plugin = unsafe { this(this_) }?.read()?;
        // SAFETY: the launch's pointers hold what its counts and descriptions say.
        unsafe { launch::with_launch(l, |launch| plugin.enqueue(launch)) }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn serialize_fields(
    this_: *mut c_void,
    fields: *mut *const TtrtField,
    nb: *mut i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's own `self_`.
        let p = unsafe { this(this_) }?;
        let values = p.read()?.fields_to_serialize();
        let raw = RawFields::new(values.iter().map(|f| (f.name.as_str(), &f.value)))
            .map_err(PluginError::Execution)?;
        let count = ptr::to_count(raw.as_slice().len(), "fields").map_err(invalid)?;
        let first = raw.as_slice().as_ptr();
        let mut slot = p
            .serialized
            .lock()
            .map_err(|_| PluginError::Execution("plugin is unusable after a panic".into()))?;
        *slot = Some(raw);
        // SAFETY: the host passes room for one pointer and one count.
        unsafe { ptr::write_all(fields, 1, &[first], "fields result") }.map_err(invalid)?;
        // SAFETY: as above.
        unsafe { ptr::write_all(nb, 1, &[count], "field count result") }.map_err(invalid)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn clone(
    this_: *mut c_void,
    out: *mut *mut TtrtPlugin,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        if out.is_null() {
            return Err(invalid("clone: output pointer is NULL".into()));
        }
        // SAFETY: the host passes the table's own `self_`.
        let copy = unsafe { this(this_) }?.read()?.clone_plugin();
        // SAFETY: non-NULL; the host passes a writable pointer.
        unsafe { out.write(export_plugin(copy)) };
        Ok(())
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn destroy(this_: *mut c_void) {
    if this_.is_null() {
        return;
    }
    // SAFETY: made by `Box::into_raw` in `export_plugin`; the host destroys each plugin once.
    let boxed = unsafe { Box::from_raw(this_.cast::<ExportedPlugin>()) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(boxed)));
}
