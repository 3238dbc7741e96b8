//! A plugin table from a library, as a [`Plugin`].

use std::ffi::c_void;
use std::sync::Arc;

use super::desc;
use super::dims::DimArena;
use super::fields::read_fields;
use super::host::LibHandle;
use super::ptr;
use super::status::{ErrorBuf, context, error_of};
use super::types::{
    TTRT_DIM_INVALID, TTRT_MAX_DIMS, TTRT_OK, TtrtCloneFn, TtrtConfigureFn, TtrtDestroyFn,
    TtrtEnqueueFn, TtrtErrorBuf, TtrtLaunch, TtrtNumOutputsFn, TtrtOutputDtypesFn,
    TtrtOutputShapesFn, TtrtPlugin, TtrtPortDesc, TtrtSerializeFieldsFn, TtrtShapeExpr, TtrtStatus,
    TtrtSupportsFn, TtrtWorkspaceSizeFn,
};
use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, PortDesc, TensorDesc};
use crate::error::{PluginError, PluginResult};
use crate::field::FieldCollection;
use crate::plugin::{Launch, Plugin, PluginKey};

/// The functions of a plugin table, required ones checked present.
#[derive(Clone, Copy)]
struct PluginFns {
    num_outputs: TtrtNumOutputsFn,
    output_dtypes: TtrtOutputDtypesFn,
    output_shapes: TtrtOutputShapesFn,
    supports: TtrtSupportsFn,
    configure: Option<TtrtConfigureFn>,
    workspace_size: Option<TtrtWorkspaceSizeFn>,
    enqueue: TtrtEnqueueFn,
    serialize_fields: TtrtSerializeFieldsFn,
    clone: TtrtCloneFn,
}

impl PluginFns {
    fn from_raw(t: &TtrtPlugin) -> Result<PluginFns, String> {
        let missing = |name: &str| format!("plugin table has no `{name}` function");
        Ok(PluginFns {
            num_outputs: t.num_outputs.ok_or_else(|| missing("num_outputs"))?,
            output_dtypes: t.output_dtypes.ok_or_else(|| missing("output_dtypes"))?,
            output_shapes: t.output_shapes.ok_or_else(|| missing("output_shapes"))?,
            supports: t.supports.ok_or_else(|| missing("supports"))?,
            configure: t.configure,
            workspace_size: t.workspace_size,
            enqueue: t.enqueue.ok_or_else(|| missing("enqueue"))?,
            serialize_fields: t
                .serialize_fields
                .ok_or_else(|| missing("serialize_fields"))?,
            clone: t.clone.ok_or_else(|| missing("clone"))?,
        })
    }
}

/// A plugin living in a loaded library; it keeps the library loaded and destroys the
/// library's plugin when dropped. Its fields are read back after create, clone and
/// configure, the only points where a plugin's state changes.
pub struct ForeignPlugin {
    lib: Arc<LibHandle>,
    this: *mut c_void,
    fns: PluginFns,
    destroy: TtrtDestroyFn,
    key: PluginKey,
    layer: String,
    context: String,
    num_outputs: usize,
    fields: FieldCollection,
}

// SAFETY: `torchtrt_plugin.h` requires a plugin's functions other than `configure` and
// `destroy` to be callable concurrently from any thread; `configure` takes `&mut self` and
// `destroy` runs in `Drop`.
unsafe impl Send for ForeignPlugin {}
// SAFETY: as for `Send`.
unsafe impl Sync for ForeignPlugin {}

/// What a launch hands to the library, in host terms.
struct RawLaunch<'a> {
    device: DeviceKind,
    ordinal: i32,
    inputs: &'a [TensorDesc],
    outputs: &'a [TensorDesc],
    in_ptrs: &'a [*const c_void],
    out_ptrs: &'a [*mut c_void],
    workspace: *mut c_void,
    workspace_size: usize,
    stream: *mut c_void,
    threads: usize,
}

impl ForeignPlugin {
    /// Takes ownership of a plugin table returned by `create` or `clone`.
    ///
    /// # Safety
    /// `raw` is NULL or a plugin table of the library `lib` keeps loaded, owned by no one else.
    pub(crate) unsafe fn new(
        lib: Arc<LibHandle>,
        key: PluginKey,
        layer: &str,
        raw: *mut TtrtPlugin,
    ) -> PluginResult<ForeignPlugin> {
        let context = context(&key, layer);
        let broken = |e: &str| PluginError::Execution(format!("{context}: {e}"));
        if raw.is_null() || !raw.is_aligned() {
            return Err(broken(
                "the library returned a NULL or misaligned plugin table",
            ));
        }
        // SAFETY: non-NULL, aligned and valid by the caller's promise.
        let table = unsafe { raw.read() };
        let destroy = table
            .destroy
            .ok_or_else(|| broken("plugin table has no `destroy` function"))?;
        let fns = match PluginFns::from_raw(&table) {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: the table's own `destroy` on its own `self`, once.
                unsafe { destroy(table.self_) };
                return Err(broken(&e));
            }
        };
        let mut plugin = ForeignPlugin {
            lib,
            this: table.self_,
            fns,
            destroy,
            key,
            layer: layer.to_string(),
            context,
            num_outputs: 0,
            fields: FieldCollection::new(),
        };
        plugin.num_outputs = plugin.query_num_outputs()?;
        plugin.fields = plugin.query_fields()?;
        Ok(plugin)
    }

    /// Runs one table call with a fresh error buffer, mapping a failure to an error.
    fn call(&self, f: impl FnOnce(*mut TtrtErrorBuf) -> TtrtStatus) -> PluginResult<()> {
        let mut buf = ErrorBuf::new();
        let mut err = buf.raw();
        let status = f(&mut err);
        if status == TTRT_OK {
            Ok(())
        } else {
            Err(error_of(status, &buf.message(), &self.key, &self.layer))
        }
    }

    fn broken(&self, e: &str) -> PluginError {
        PluginError::Execution(format!("{}: {e}", self.context))
    }

    fn invalid(&self, e: &str) -> PluginError {
        PluginError::InvalidInput(format!("{}: {e}", self.context))
    }

    fn count(&self, n: usize, what: &str) -> PluginResult<i32> {
        ptr::to_count(n, what).map_err(|e| self.invalid(&e))
    }

    fn query_num_outputs(&self) -> PluginResult<usize> {
        let mut n = -1i32;
        // SAFETY: the table's function on its own `self`; `n` is writable.
        self.call(|err| unsafe { (self.fns.num_outputs)(self.this, &mut n, err) })?;
        usize::try_from(n).map_err(|_| self.broken(&format!("num_outputs returned {n}")))
    }

    fn query_fields(&self) -> PluginResult<FieldCollection> {
        let mut fields = std::ptr::null();
        let mut nb = 0i32;
        // SAFETY: the table's function on its own `self`; both results are writable.
        self.call(|err| unsafe {
            (self.fns.serialize_fields)(self.this, &mut fields, &mut nb, err)
        })?;
        // SAFETY: the library keeps `nb` fields at `fields` until its next call.
        unsafe { read_fields(fields, nb) }
            .map_err(|e| self.broken(&format!("serialized fields: {e}")))
    }

    fn query_workspace(
        &self,
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
    ) -> PluginResult<usize> {
        let Some(f) = self.fns.workspace_size else {
            return Ok(0);
        };
        let ins = desc::to_raw_all(inputs).map_err(|e| self.invalid(&e))?;
        let outs = desc::to_raw_all(outputs).map_err(|e| self.invalid(&e))?;
        let (ni, no) = (
            self.count(ins.len(), "inputs")?,
            self.count(outs.len(), "outputs")?,
        );
        let mut size = 0usize;
        // SAFETY: the table's function on its own `self`; arrays hold their counts.
        self.call(|err| unsafe {
            f(
                self.this,
                ins.as_ptr(),
                ni,
                outs.as_ptr(),
                no,
                &mut size,
                err,
            )
        })?;
        Ok(size)
    }

    fn try_clone(&self) -> PluginResult<ForeignPlugin> {
        let mut out = std::ptr::null_mut();
        // SAFETY: the table's function on its own `self`; `out` is writable.
        self.call(|err| unsafe { (self.fns.clone)(self.this, &mut out, err) })?;
        // SAFETY: on success `out` is a new plugin table of the same library, now ours.
        unsafe { ForeignPlugin::new(self.lib.clone(), self.key.clone(), &self.layer, out) }
    }

    fn check_tensors(&self, descs: &[TensorDesc], lens: &[usize], what: &str) -> PluginResult<()> {
        for (i, (d, &len)) in descs.iter().zip(lens).enumerate() {
            if d.byte_len() != Some(len) {
                return Err(self.invalid(&format!("{what} {i} is {d} but holds {len} bytes")));
            }
        }
        Ok(())
    }

    fn launch(&self, a: RawLaunch<'_>) -> PluginResult<()> {
        if a.outputs.len() != self.num_outputs {
            return Err(self.invalid(&format!(
                "{} outputs given, the plugin has {}",
                a.outputs.len(),
                self.num_outputs
            )));
        }
        let ins = desc::to_raw_all(a.inputs).map_err(|e| self.invalid(&e))?;
        let outs = desc::to_raw_all(a.outputs).map_err(|e| self.invalid(&e))?;
        let raw = TtrtLaunch {
            device: a.device as i32,
            device_ordinal: a.ordinal,
            nb_inputs: self.count(ins.len(), "inputs")?,
            nb_outputs: self.count(outs.len(), "outputs")?,
            input_descs: ins.as_ptr(),
            output_descs: outs.as_ptr(),
            inputs: a.in_ptrs.as_ptr(),
            outputs: a.out_ptrs.as_ptr(),
            workspace: a.workspace,
            workspace_size: a.workspace_size,
            stream: a.stream,
            threads: i32::try_from(a.threads.max(1)).unwrap_or(i32::MAX),
            reserved: 0,
        };
        // SAFETY: the table's function on its own `self`; `raw` describes live buffers.
        self.call(|err| unsafe { (self.fns.enqueue)(self.this, &raw, err) })
    }
}

impl Drop for ForeignPlugin {
    fn drop(&mut self) {
        // SAFETY: the table's own `destroy` on its own `self`, once; the library is still
        // loaded because `self.lib` is dropped after this.
        unsafe { (self.destroy)(self.this) };
    }
}

impl Plugin for ForeignPlugin {
    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        let ins: Vec<i32> = inputs.iter().map(|&d| d as i32).collect();
        let mut outs = vec![-1i32; self.num_outputs];
        let (ni, no) = (
            self.count(ins.len(), "inputs")?,
            self.count(outs.len(), "outputs")?,
        );
        // SAFETY: the table's function on its own `self`; arrays hold their counts.
        self.call(|err| unsafe {
            (self.fns.output_dtypes)(self.this, ins.as_ptr(), ni, outs.as_mut_ptr(), no, err)
        })?;
        outs.iter()
            .enumerate()
            .map(|(i, &d)| {
                DType::from_raw(d)
                    .ok_or_else(|| self.broken(&format!("output {i} has unknown dtype {d}")))
            })
            .collect()
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        let arena = DimArena::new();
        let ins = inputs
            .iter()
            .map(|s| arena.push_shape(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.invalid(&e))?;
        let empty = TtrtShapeExpr {
            nb_dims: -1,
            reserved: 0,
            dims: [TTRT_DIM_INVALID; TTRT_MAX_DIMS],
        };
        let mut outs = vec![empty; self.num_outputs];
        let (ni, no) = (
            self.count(ins.len(), "inputs")?,
            self.count(outs.len(), "outputs")?,
        );
        let builder = arena.builder();
        // SAFETY: the table's function on its own `self`; arrays hold their counts and the
        // builder's arena outlives the call.
        self.call(|err| unsafe {
            (self.fns.output_shapes)(
                self.this,
                ins.as_ptr(),
                ni,
                outs.as_mut_ptr(),
                no,
                &builder,
                err,
            )
        })?;
        outs.iter()
            .enumerate()
            .map(|(i, s)| {
                arena
                    .read_shape(s)
                    .map_err(|e| self.broken(&format!("output {i} shape: {e}")))
            })
            .collect()
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        let ports: Vec<TtrtPortDesc> = io.iter().map(desc::port_to_raw).collect();
        let (Ok(pos), Ok(nb_io), Ok(nb_in)) = (
            i32::try_from(pos),
            i32::try_from(ports.len()),
            i32::try_from(num_inputs),
        ) else {
            return false;
        };
        // SAFETY: the table's function on its own `self`; `ports` holds `nb_io` entries.
        let r = unsafe {
            (self.fns.supports)(self.this, pos, ports.as_ptr(), nb_io, nb_in, device as i32)
        };
        r != 0
    }

    fn configure(&mut self, inputs: &[TensorDesc], outputs: &[TensorDesc]) -> PluginResult<()> {
        if let Some(f) = self.fns.configure {
            let ins = desc::to_raw_all(inputs).map_err(|e| self.invalid(&e))?;
            let outs = desc::to_raw_all(outputs).map_err(|e| self.invalid(&e))?;
            let (ni, no) = (
                self.count(ins.len(), "inputs")?,
                self.count(outs.len(), "outputs")?,
            );
            // SAFETY: the table's function on its own `self`; arrays hold their counts.
            self.call(|err| unsafe { f(self.this, ins.as_ptr(), ni, outs.as_ptr(), no, err) })?;
        }
        self.fields = self.query_fields()?;
        Ok(())
    }

    /// The library's answer; 0 when it fails, in which case `enqueue` reports the failure.
    fn workspace_size(&self, inputs: &[TensorDesc], outputs: &[TensorDesc]) -> usize {
        self.query_workspace(inputs, outputs).unwrap_or(0)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        match launch {
            Launch::Cpu(c) => {
                let ins: Vec<TensorDesc> = c.inputs.iter().map(|t| t.desc.clone()).collect();
                let outs: Vec<TensorDesc> = c.outputs.iter().map(|t| t.desc.clone()).collect();
                let in_lens: Vec<usize> = c.inputs.iter().map(|t| t.data.len()).collect();
                let out_lens: Vec<usize> = c.outputs.iter().map(|t| t.data.len()).collect();
                self.check_tensors(&ins, &in_lens, "input")?;
                self.check_tensors(&outs, &out_lens, "output")?;
                let needed = self.query_workspace(&ins, &outs)?;
                if c.workspace.len() < needed {
                    return Err(self.invalid(&format!(
                        "workspace of {} bytes, the plugin needs {needed}",
                        c.workspace.len()
                    )));
                }
                let in_ptrs: Vec<*const c_void> =
                    c.inputs.iter().map(|t| t.data.as_ptr().cast()).collect();
                let out_ptrs: Vec<*mut c_void> = c
                    .outputs
                    .iter_mut()
                    .map(|t| t.data.as_mut_ptr().cast())
                    .collect();
                self.launch(RawLaunch {
                    device: DeviceKind::Cpu,
                    ordinal: 0,
                    inputs: &ins,
                    outputs: &outs,
                    in_ptrs: &in_ptrs,
                    out_ptrs: &out_ptrs,
                    workspace: c.workspace.as_mut_ptr().cast(),
                    workspace_size: c.workspace.len(),
                    stream: std::ptr::null_mut(),
                    threads: c.threads,
                })
            }
            Launch::Cuda(c) => {
                let ins: Vec<TensorDesc> = c.inputs.iter().map(|t| t.desc.clone()).collect();
                let outs: Vec<TensorDesc> = c.outputs.iter().map(|t| t.desc.clone()).collect();
                let device_ptr = |p: u64| std::ptr::without_provenance_mut::<c_void>(p as usize);
                let in_ptrs: Vec<*const c_void> = c
                    .inputs
                    .iter()
                    .map(|t| device_ptr(t.ptr).cast_const())
                    .collect();
                let out_ptrs: Vec<*mut c_void> =
                    c.outputs.iter().map(|t| device_ptr(t.ptr)).collect();
                let needed = self.query_workspace(&ins, &outs)?;
                self.launch(RawLaunch {
                    device: DeviceKind::Cuda,
                    ordinal: c.device,
                    inputs: &ins,
                    outputs: &outs,
                    in_ptrs: &in_ptrs,
                    out_ptrs: &out_ptrs,
                    workspace: device_ptr(c.workspace),
                    workspace_size: needed,
                    stream: c.stream,
                    threads: 1,
                })
            }
        }
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.fields.clone()
    }

    /// A copy made by the library; if the library fails, a plugin that reports that
    /// failure from every fallible call.
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        match self.try_clone() {
            Ok(p) => Box::new(p),
            Err(error) => Box::new(FailedClone {
                error,
                num_outputs: self.num_outputs,
                fields: self.fields.clone(),
            }),
        }
    }
}

/// What `clone_plugin` returns when the library could not clone: every fallible call fails
/// with the library's error, and nothing is supported.
struct FailedClone {
    error: PluginError,
    num_outputs: usize,
    fields: FieldCollection,
}

impl Plugin for FailedClone {
    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn output_dtypes(&self, _inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Err(self.error.clone())
    }

    fn output_shapes(&self, _inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Err(self.error.clone())
    }

    fn supports(
        &self,
        _pos: usize,
        _io: &[PortDesc],
        _num_inputs: usize,
        _device: DeviceKind,
    ) -> bool {
        false
    }

    fn configure(&mut self, _inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> PluginResult<()> {
        Err(self.error.clone())
    }

    fn enqueue(&self, _launch: Launch<'_, '_>) -> PluginResult<()> {
        Err(self.error.clone())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.fields.clone()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(FailedClone {
            error: self.error.clone(),
            num_outputs: self.num_outputs,
            fields: self.fields.clone(),
        })
    }
}
