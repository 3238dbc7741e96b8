//! The host's C `TtrtNetworkBuilder` as a Rust [`NetworkBuilder`], for converters exported
//! from Rust libraries. Every call checks that the host filled the member it needs.

use std::ffi::{CString, c_void};

use super::desc;
use super::ext_types::{TTRT_CONVERTER_ABI_VERSION, TtrtNetworkBuilder, TtrtTensorHandle};
use super::fields::RawFields;
use super::ptr;
use super::status::ErrorBuf;
use super::types::{
    TTRT_ERROR_INVALID_ARGUMENT, TTRT_ERROR_PANIC, TTRT_ERROR_UNSUPPORTED, TTRT_OK, TtrtErrorBuf,
    TtrtStatus,
};
use crate::converter::{BinaryOp, NetworkBuilder, TensorHandle, UnaryOp};
use crate::dtype::{DType, TensorDesc};
use crate::error::{PluginError, PluginResult};
use crate::field::FieldCollection;
use crate::plugin::PluginKey;

/// Most outputs a plugin added through [`NetworkBuilder::add_plugin`] may have.
const MAX_PLUGIN_OUTPUTS: usize = 64;

/// A host builder table, valid for the `convert` call it was passed to.
pub(crate) struct ForeignBuilder<'a> {
    raw: &'a TtrtNetworkBuilder,
}

/// The error a failed host call reported.
pub(crate) fn error_of_status(status: TtrtStatus, msg: String) -> PluginError {
    match status {
        TTRT_ERROR_INVALID_ARGUMENT => PluginError::InvalidInput(msg),
        TTRT_ERROR_UNSUPPORTED => PluginError::Unsupported(msg),
        TTRT_ERROR_PANIC => PluginError::Panic(msg),
        _ => PluginError::Execution(msg),
    }
}

fn missing(what: &str) -> PluginError {
    PluginError::Unsupported(format!("the host's network builder has no `{what}`"))
}

fn invalid(e: String) -> PluginError {
    PluginError::InvalidInput(e)
}

impl<'a> ForeignBuilder<'a> {
    /// Checks the table's version.
    pub(crate) fn new(raw: &'a TtrtNetworkBuilder) -> PluginResult<ForeignBuilder<'a>> {
        if raw.abi_version != TTRT_CONVERTER_ABI_VERSION
            || (raw.size as usize) < size_of::<TtrtNetworkBuilder>()
        {
            return Err(PluginError::Unsupported(format!(
                "the host's network builder is version {} of {} bytes; this library needs version \
                 {TTRT_CONVERTER_ABI_VERSION} of {} bytes",
                raw.abi_version,
                raw.size,
                size_of::<TtrtNetworkBuilder>()
            )));
        }
        Ok(ForeignBuilder { raw })
    }

    fn call(f: impl FnOnce(*mut TtrtErrorBuf) -> TtrtStatus) -> PluginResult<()> {
        let mut buf = ErrorBuf::new();
        let mut err = buf.raw();
        match f(&mut err) {
            TTRT_OK => Ok(()),
            status => Err(error_of_status(status, buf.message())),
        }
    }

    fn handle(
        f: impl FnOnce(*mut TtrtTensorHandle, *mut TtrtErrorBuf) -> TtrtStatus,
    ) -> PluginResult<TensorHandle> {
        let mut out: TtrtTensorHandle = -1;
        Self::call(|err| f(&mut out, err))?;
        Ok(TensorHandle(out))
    }

    fn ctx(&self) -> *mut c_void {
        self.raw.ctx
    }
}

impl NetworkBuilder for ForeignBuilder<'_> {
    fn tensor_desc(&self, t: TensorHandle) -> PluginResult<TensorDesc> {
        let f = self.raw.tensor_desc.ok_or_else(|| missing("tensor_desc"))?;
        let mut raw = desc::to_raw(&TensorDesc::new(DType::F32, Vec::new())).map_err(invalid)?;
        // SAFETY: the host's function with its own context; `raw` is writable.
        Self::call(|err| unsafe { f(self.ctx(), t.0, &mut raw, err) })?;
        desc::from_raw(&raw).map_err(|e| PluginError::Execution(format!("tensor_desc: {e}")))
    }

    fn tensor_value(&self, t: TensorHandle) -> Option<&[u8]> {
        let f = self.raw.tensor_value?;
        let mut data: *const c_void = std::ptr::null();
        let mut n = 0usize;
        // SAFETY: the host's function with its own context; both pointers are writable.
        if unsafe { f(self.ctx(), t.0, &mut data, &mut n) } != 1 {
            return None;
        }
        // SAFETY: the host keeps the bytes valid until `convert` returns, which outlives `self`.
        unsafe { ptr::slice(data.cast::<u8>(), n, "tensor value") }.ok()
    }

    fn add_constant(&mut self, d: &TensorDesc, data: &[u8]) -> PluginResult<TensorHandle> {
        let f = self
            .raw
            .add_constant
            .ok_or_else(|| missing("add_constant"))?;
        let raw = desc::to_raw(d).map_err(invalid)?;
        // SAFETY: the host's function with its own context; every pointer is valid for the call.
        Self::handle(|out, err| unsafe {
            f(self.ctx(), &raw, data.as_ptr().cast(), data.len(), out, err)
        })
    }

    fn add_binary(
        &mut self,
        op: BinaryOp,
        a: TensorHandle,
        b: TensorHandle,
    ) -> PluginResult<TensorHandle> {
        let f = self.raw.add_binary.ok_or_else(|| missing("add_binary"))?;
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), op as i32, a.0, b.0, out, err) })
    }

    fn add_unary(&mut self, op: UnaryOp, x: TensorHandle) -> PluginResult<TensorHandle> {
        let f = self.raw.add_unary.ok_or_else(|| missing("add_unary"))?;
        let (code, alpha, beta) = op.to_raw();
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), code, x.0, alpha, beta, out, err) })
    }

    fn add_matmul(
        &mut self,
        a: TensorHandle,
        b: TensorHandle,
        transpose_a: bool,
        transpose_b: bool,
    ) -> PluginResult<TensorHandle> {
        let f = self.raw.add_matmul.ok_or_else(|| missing("add_matmul"))?;
        let (ta, tb) = (i32::from(transpose_a), i32::from(transpose_b));
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), a.0, b.0, ta, tb, out, err) })
    }

    fn add_reshape(&mut self, x: TensorHandle, dims: &[i64]) -> PluginResult<TensorHandle> {
        let f = self.raw.add_reshape.ok_or_else(|| missing("add_reshape"))?;
        let n = ptr::to_count(dims.len(), "reshape dims").map_err(invalid)?;
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), x.0, dims.as_ptr(), n, out, err) })
    }

    fn add_transpose(&mut self, x: TensorHandle, perm: &[usize]) -> PluginResult<TensorHandle> {
        let f = self
            .raw
            .add_transpose
            .ok_or_else(|| missing("add_transpose"))?;
        let perm = perm
            .iter()
            .map(|&p| i32::try_from(p).map_err(|_| invalid(format!("permutation entry {p}"))))
            .collect::<PluginResult<Vec<i32>>>()?;
        let n = ptr::to_count(perm.len(), "permutation").map_err(invalid)?;
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), x.0, perm.as_ptr(), n, out, err) })
    }

    fn add_concat(&mut self, inputs: &[TensorHandle], axis: i64) -> PluginResult<TensorHandle> {
        let f = self.raw.add_concat.ok_or_else(|| missing("add_concat"))?;
        let raw: Vec<i64> = inputs.iter().map(|h| h.0).collect();
        let n = ptr::to_count(raw.len(), "concat inputs").map_err(invalid)?;
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), raw.as_ptr(), n, axis, out, err) })
    }

    fn add_cast(&mut self, x: TensorHandle, dtype: DType) -> PluginResult<TensorHandle> {
        let f = self.raw.add_cast.ok_or_else(|| missing("add_cast"))?;
        // SAFETY: as above.
        Self::handle(|out, err| unsafe { f(self.ctx(), x.0, dtype as i32, out, err) })
    }

    fn add_plugin(
        &mut self,
        key: &PluginKey,
        fields: &FieldCollection,
        inputs: &[TensorHandle],
    ) -> PluginResult<Vec<TensorHandle>> {
        let f = self.raw.add_plugin.ok_or_else(|| missing("add_plugin"))?;
        let bad = |e: String| invalid(format!("plugin {key}: {e}"));
        let c = |s: &str| CString::new(s).map_err(|_| bad("NUL byte in the key".into()));
        let (ns, name, version) = (c(&key.namespace)?, c(&key.name)?, c(&key.version)?);
        let raw =
            RawFields::new(fields.iter().map(|f| (f.name.as_str(), &f.value))).map_err(bad)?;
        let nf = ptr::to_count(raw.as_slice().len(), "fields").map_err(bad)?;
        let ins: Vec<i64> = inputs.iter().map(|h| h.0).collect();
        let ni = ptr::to_count(ins.len(), "inputs").map_err(bad)?;
        let mut outs = vec![-1i64; MAX_PLUGIN_OUTPUTS];
        let capacity = ptr::to_count(MAX_PLUGIN_OUTPUTS, "outputs").map_err(invalid)?;
        let mut n = 0i32;
        // SAFETY: the host's function with its own context; every pointer is valid for the
        // call and `outs` has room for `capacity` handles.
        Self::call(|err| unsafe {
            f(
                self.ctx(),
                ns.as_ptr(),
                name.as_ptr(),
                version.as_ptr(),
                raw.as_slice().as_ptr(),
                nf,
                ins.as_ptr(),
                ni,
                outs.as_mut_ptr(),
                capacity,
                &mut n,
                err,
            )
        })?;
        outs.truncate(
            ptr::count(n, "plugin outputs")
                .map_err(invalid)?
                .min(MAX_PLUGIN_OUTPUTS),
        );
        Ok(outs.into_iter().map(TensorHandle).collect())
    }

    fn set_output(&mut self, index: usize, t: TensorHandle) -> PluginResult<()> {
        let f = self.raw.set_output.ok_or_else(|| missing("set_output"))?;
        let i = ptr::to_count(index, "output index").map_err(invalid)?;
        // SAFETY: as above.
        Self::call(|err| unsafe { f(self.ctx(), i, t.0, err) })
    }
}
