//! A plugin table from a library, as a [`Plugin`].

mod failed;
mod launch;

use std::ffi::c_void;
use std::sync::Arc;

use self::failed::FailedClone;
use crate::abi::desc;
use crate::abi::dims::DimArena;
use crate::abi::fields::read_fields;
use crate::abi::host::LibHandle;
use crate::abi::ptr;
use crate::abi::shape_values;
use crate::abi::status::{ErrorBuf, context, error_of};
use crate::abi::types::{
    TTRT_DIM_INVALID, TTRT_MAX_DIMS, TTRT_OK, TtrtAliasedInputFn, TtrtCloneFn, TtrtConfigureFn,
    TtrtDestroyFn, TtrtEnqueueFn, TtrtErrorBuf, TtrtNumOutputsFn, TtrtOutputDtypesFn,
    TtrtOutputShapesFn, TtrtOutputShapesOfFn, TtrtPlugin, TtrtPortDesc, TtrtSerializeFieldsFn,
    TtrtSetTacticFn, TtrtShapeExpr, TtrtShapeInputsFn, TtrtSizedOutput, TtrtSizedOutputsFn,
    TtrtStatus, TtrtSupportsFn, TtrtTactic, TtrtTacticsFn, TtrtWorkspaceSizeFn,
};
use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, PortDesc, TensorDesc};
use crate::error::{PluginError, PluginResult};
use crate::field::FieldCollection;
use crate::plugin::{Launch, Plugin, PluginKey};
use crate::shape_values::ShapeValues;
use crate::sized_output::SizedOutput;
use crate::tactic::Tactic;

/// A library's plugin table, reading only the members its ABI `version` has (version 3
/// appended `shape_inputs`, `output_shapes_of`, `sized_outputs`, `tactics` and
/// `set_tactic`; version 4 `aliased_input`); later members stay NULL.
///
/// # Safety
/// `raw` is non-NULL, aligned, and points to a table of at least `version`'s size.
unsafe fn read_table(raw: *const TtrtPlugin, version: u32) -> TtrtPlugin {
    let prefix = match version {
        ..3 => std::mem::offset_of!(TtrtPlugin, shape_inputs),
        3 => std::mem::offset_of!(TtrtPlugin, aliased_input),
        // SAFETY: a whole table, by the caller's promise.
        _ => return unsafe { raw.read() },
    };
    let mut table = std::mem::MaybeUninit::<TtrtPlugin>::zeroed();
    // SAFETY: `prefix` bytes exist at `raw` (a table of an older version) and fit in
    // `table`; the zeroed rest is NULL function pointers, valid `None`s.
    unsafe {
        std::ptr::copy_nonoverlapping(raw.cast::<u8>(), table.as_mut_ptr().cast::<u8>(), prefix);
        table.assume_init()
    }
}

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
    shape_inputs: Option<TtrtShapeInputsFn>,
    output_shapes_of: Option<TtrtOutputShapesOfFn>,
    sized_outputs: Option<TtrtSizedOutputsFn>,
    tactics: Option<TtrtTacticsFn>,
    set_tactic: Option<TtrtSetTacticFn>,
    aliased_input: Option<TtrtAliasedInputFn>,
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
            shape_inputs: t.shape_inputs,
            output_shapes_of: t.output_shapes_of,
            sized_outputs: t.sized_outputs,
            tactics: t.tactics,
            set_tactic: t.set_tactic,
            aliased_input: t.aliased_input,
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
    shape_inputs: Vec<usize>,
    sized_outputs: Vec<SizedOutput>,
}

// SAFETY: `torchtrt_plugin.h` requires a plugin's functions other than `configure` and
// `destroy` to be callable concurrently from any thread; `configure` takes `&mut self` and
// `destroy` runs in `Drop`.
unsafe impl Send for ForeignPlugin {}
// SAFETY: as for `Send`.
unsafe impl Sync for ForeignPlugin {}

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
        // SAFETY: non-NULL, aligned and valid by the caller's promise, as a table of the
        // library's version: only that version's members are read.
        let table = unsafe { read_table(raw, lib.version()) };
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
            shape_inputs: Vec::new(),
            sized_outputs: Vec::new(),
        };
        plugin.num_outputs = plugin.query_num_outputs()?;
        plugin.fields = plugin.query_fields()?;
        plugin.shape_inputs = plugin.query_shape_inputs()?;
        plugin.sized_outputs = plugin.query_sized_outputs()?;
        Ok(plugin)
    }

    fn query_tactics(
        &self,
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
        device: DeviceKind,
    ) -> PluginResult<Vec<Tactic>> {
        let Some(f) = self.fns.tactics else {
            return Ok(Vec::new());
        };
        let ins = desc::to_raw_all(inputs).map_err(|e| self.invalid(&e))?;
        let outs = desc::to_raw_all(outputs).map_err(|e| self.invalid(&e))?;
        let (ni, no) = (
            self.count(ins.len(), "inputs")?,
            self.count(outs.len(), "outputs")?,
        );
        let raw = self.read_list::<TtrtTactic, 16>("tactics", |list, cap, nb, err| {
            // SAFETY: the table's function on its own `self`; arrays hold their counts.
            unsafe {
                f(
                    self.this,
                    ins.as_ptr(),
                    ni,
                    outs.as_ptr(),
                    no,
                    device as i32,
                    list,
                    cap,
                    nb,
                    err,
                )
            }
        })?;
        raw.iter()
            .map(|t| {
                let bytes: Vec<u8> = t.name.iter().map(|&c| c as u8).collect();
                let name = std::ffi::CStr::from_bytes_until_nul(&bytes)
                    .ok()
                    .and_then(|c| c.to_str().ok())
                    .ok_or_else(|| self.broken(&format!("tactic {} has a malformed name", t.id)))?;
                Ok(Tactic::new(t.id, name))
            })
            .collect()
    }

    fn query_sized_outputs(&self) -> PluginResult<Vec<SizedOutput>> {
        let Some(f) = self.fns.sized_outputs else {
            return Ok(Vec::new());
        };
        let sized =
            self.read_list::<TtrtSizedOutput, 16>("sized_outputs", |list, cap, nb, err| {
                // SAFETY: the table's function on its own `self`; `list` holds `cap` entries.
                unsafe { f(self.this, list, cap, nb, err) }
            })?;
        sized
            .iter()
            .map(|s| {
                Ok(SizedOutput {
                    output: self.index(s.output, "sized output")?,
                    axis: self.index(s.axis, "sized output")?,
                    count: self.index(s.count, "sized output")?,
                })
            })
            .collect()
    }

    fn query_shape_inputs(&self) -> PluginResult<Vec<usize>> {
        let Some(f) = self.fns.shape_inputs else {
            return Ok(Vec::new());
        };
        let indices = self.read_list::<i32, 64>("shape_inputs", |list, cap, nb, err| {
            // SAFETY: the table's function on its own `self`; `list` holds `cap` entries.
            unsafe { f(self.this, list, cap, nb, err) }
        })?;
        indices
            .iter()
            .map(|&i| self.index(i, "shape input"))
            .collect()
    }

    /// Calls the table function `name`, which writes at most `N` entries into the array it
    /// is given and their number; the entries written.
    fn read_list<T: Copy + Default, const N: usize>(
        &self,
        name: &str,
        f: impl FnOnce(*mut T, i32, &mut i32, *mut TtrtErrorBuf) -> TtrtStatus,
    ) -> PluginResult<Vec<T>> {
        let mut list = [T::default(); N];
        let mut nb = -1i32;
        self.call(|err| f(list.as_mut_ptr(), N as i32, &mut nb, err))?;
        let n = usize::try_from(nb)
            .ok()
            .filter(|&n| n <= N)
            .ok_or_else(|| self.broken(&format!("{name} returned {nb} (at most {N})")))?;
        Ok(list[..n].to_vec())
    }

    /// A `what` index from the library, refused when negative.
    fn index(&self, i: i32, what: &str) -> PluginResult<usize> {
        usize::try_from(i).map_err(|_| self.broken(&format!("{what} index {i} is negative")))
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
        self.output_shapes_of(inputs, &[])
    }

    fn shape_inputs(&self) -> Vec<usize> {
        self.shape_inputs.clone()
    }

    fn sized_outputs(&self) -> Vec<SizedOutput> {
        self.sized_outputs.clone()
    }

    /// The library's answer; negative answers and NULL mean none. An index past the inputs
    /// is returned as it is, for the builder to refuse with the layer's name.
    fn aliased_input(&self, output: usize) -> Option<usize> {
        let f = self.fns.aliased_input?;
        let output = i32::try_from(output).ok()?;
        // SAFETY: the table's function on its own `self`.
        let i = unsafe { f(self.this, output) };
        usize::try_from(i).ok()
    }

    fn output_shapes_of(
        &self,
        inputs: &[ShapeExpr],
        values: &[ShapeValues],
    ) -> PluginResult<Vec<ShapeExpr>> {
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
        match self.fns.output_shapes_of {
            Some(f) => {
                let mut all = vec![ShapeValues::Unknown; inputs.len()];
                for (a, v) in all.iter_mut().zip(values) {
                    a.clone_from(v);
                }
                let raw = shape_values::to_raw(&all).map_err(|e| self.invalid(&e))?;
                // SAFETY: the table's function on its own `self`; arrays hold their counts,
                // `raw` points into `all` and the builder's arena outlives the call.
                self.call(|err| unsafe {
                    f(
                        self.this,
                        ins.as_ptr(),
                        raw.as_ptr(),
                        ni,
                        outs.as_mut_ptr(),
                        no,
                        &builder,
                        err,
                    )
                })?
            }
            // SAFETY: as above, without values.
            None => self.call(|err| unsafe {
                (self.fns.output_shapes)(
                    self.this,
                    ins.as_ptr(),
                    ni,
                    outs.as_mut_ptr(),
                    no,
                    &builder,
                    err,
                )
            })?,
        }
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
        if pos >= io.len() {
            return false;
        }
        let ports: Vec<TtrtPortDesc> = io.iter().map(desc::port_to_raw).collect();
        let (Ok(pos), Ok(nb_io), Ok(nb_in)) = (
            i32::try_from(pos),
            i32::try_from(ports.len()),
            i32::try_from(num_inputs),
        ) else {
            return false;
        };
        // SAFETY: the table's function on its own `self`; `ports` holds `nb_io > pos` entries.
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
            Launch::Cpu(c) => self.enqueue_cpu(c),
            Launch::Cuda(c) => self.enqueue_cuda(&c),
        }
    }

    /// The library's list; none when it has no `tactics` function, fails, or returns a
    /// name that is not NUL-terminated UTF-8 (the builder then runs the default).
    fn tactics(
        &self,
        inputs: &[TensorDesc],
        outputs: &[TensorDesc],
        device: DeviceKind,
    ) -> Vec<Tactic> {
        self.query_tactics(inputs, outputs, device)
            .unwrap_or_default()
    }

    fn set_tactic(&mut self, tactic: u32) -> PluginResult<()> {
        match self.fns.set_tactic {
            // SAFETY: the table's function on its own `self`.
            Some(f) => self.call(|err| unsafe { f(self.this, tactic, err) }),
            None if tactic == 0 => Ok(()),
            None => Err(self.invalid(&format!(
                "tactic {tactic}: the library's plugin has no `set_tactic`"
            ))),
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
