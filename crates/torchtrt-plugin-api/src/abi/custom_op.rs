//! Custom ops across the ABI: a Rust [`CustomOp`] as a `TtrtCustomOp` table (library side)
//! and a `TtrtCustomOp` table as a Rust [`CustomOp`] (host side), from which the host derives
//! a plugin creator ([`crate::CustomOpCreator`]).

use std::ffi::{CString, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::builder_foreign::error_of_status;
use super::desc;
use super::dims::DimArena;
use super::export_plugin::{port_query, shape_rule};
use super::ext_types::{TTRT_CUSTOM_OP_ABI_VERSION, TtrtCustomOp, TtrtOpKernelFn};
use super::fields::{RawFields, read_fields};
use super::host::LibHandle;
use super::ptr;
use super::schema::{RawSchema, read_schema};
use super::status::{ErrorBuf, guard};
use super::types::{
    TTRT_DIM_INVALID, TTRT_MAX_DIMS, TTRT_OK, TtrtErrorBuf, TtrtExprBuilder, TtrtField, TtrtLaunch,
    TtrtPortDesc, TtrtShapeExpr, TtrtStatus, TtrtSupportsFn,
};
use crate::custom_op::CustomOp;
use crate::dims::ShapeExpr;
use crate::dtype::{DType, DeviceKind, PortDesc};
use crate::error::{PluginError, PluginResult};
use crate::field::{FieldCollection, FieldSpec};
use crate::plugin::{CpuLaunch, CudaLaunch, Launch};

mod launch;

fn invalid(e: String) -> PluginError {
    PluginError::InvalidInput(e)
}

/// A Rust custom op's C table; `raw.self_` points at this value once boxed.
pub(crate) struct ExportedCustomOp {
    pub(crate) raw: TtrtCustomOp,
    op: Arc<dyn CustomOp>,
    _strings: [CString; 2],
    _schema: RawSchema,
}

impl ExportedCustomOp {
    /// The table of `op`; `self_` is set by the caller once the value has its address.
    pub(crate) fn new(op: Arc<dyn CustomOp>) -> Result<ExportedCustomOp, String> {
        let label = format!("custom op {}::{}", op.domain(), op.op_type());
        let c = |s: String| CString::new(s).map_err(|_| format!("{label}: NUL byte"));
        let strings = [c(op.domain())?, c(op.op_type())?];
        let schema = RawSchema::new(&op.attributes()).map_err(|e| format!("{label}: {e}"))?;
        Ok(ExportedCustomOp {
            raw: TtrtCustomOp {
                abi_version: TTRT_CUSTOM_OP_ABI_VERSION,
                reserved: 0,
                self_: std::ptr::null_mut(),
                domain: strings[0].as_ptr(),
                op_type: strings[1].as_ptr(),
                nb_inputs: ptr::to_count(op.num_inputs(), "inputs")?,
                nb_outputs: ptr::to_count(op.num_outputs(), "outputs")?,
                attributes: schema.as_slice().as_ptr(),
                nb_attributes: ptr::to_count(schema.as_slice().len(), "attributes")?,
                reserved1: 0,
                output_dtypes: Some(op_output_dtypes),
                output_shapes: Some(op_output_shapes),
                supports: Some(op_supports),
                cpu_kernel: Some(op_cpu_kernel),
                cuda_kernel: op
                    .has_cuda_kernel()
                    .then_some(op_cuda_kernel as TtrtOpKernelFn),
            },
            op,
            _strings: strings,
            _schema: schema,
        })
    }
}

/// # Safety
/// `this` is NULL or the `self_` of a table made by [`ExportedCustomOp::new`]; `attrs` holds
/// `nb` fields.
unsafe fn op_and_attrs<'a>(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb: i32,
) -> PluginResult<(&'a dyn CustomOp, FieldCollection)> {
    // SAFETY: by the caller's promise.
    let e = unsafe { this.cast::<ExportedCustomOp>().cast_const().as_ref() }
        .ok_or_else(|| invalid("custom op is NULL".into()))?;
    // SAFETY: by the caller's promise.
    let attrs = unsafe { read_fields(attrs, nb) }.map_err(invalid)?;
    Ok((e.op.as_ref(), attrs))
}

#[allow(clippy::too_many_arguments, reason = "mirrors the C signature")]
unsafe extern "C" fn op_output_dtypes(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    inputs: *const i32,
    nb_inputs: i32,
    outputs: *mut i32,
    nb_outputs: i32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's `self_` and `nb_attrs` fields.
        let (op, attrs) = unsafe { op_and_attrs(this, attrs, nb_attrs) }?;
        let n = ptr::count(nb_inputs, "input dtypes").map_err(invalid)?;
        // SAFETY: the host passes `nb_inputs` dtypes.
        let raw = unsafe { ptr::slice(inputs, n, "input dtypes") }.map_err(invalid)?;
        let dtypes = raw
            .iter()
            .map(|&d| DType::from_raw(d).ok_or_else(|| invalid(format!("unknown dtype {d}"))))
            .collect::<PluginResult<Vec<_>>>()?;
        let out: Vec<i32> = op
            .output_dtypes(&attrs, &dtypes)?
            .iter()
            .map(|&d| d as i32)
            .collect();
        // SAFETY: the host passes room for `nb_outputs` dtypes.
        unsafe { ptr::write_all(outputs, nb_outputs, &out, "output dtypes") }.map_err(invalid)
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

#[allow(clippy::too_many_arguments, reason = "mirrors the C signature")]
unsafe extern "C" fn op_output_shapes(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    inputs: *const TtrtShapeExpr,
    nb_inputs: i32,
    outputs: *mut TtrtShapeExpr,
    nb_outputs: i32,
    builder: *const TtrtExprBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: the host passes the table's `self_` and `nb_attrs` fields.
        let (op, attrs) = unsafe { op_and_attrs(this, attrs, nb_attrs) }?;
        // SAFETY: the host passes its builder, `nb_inputs` shapes and room for `nb_outputs`.
        unsafe {
            shape_rule(builder, inputs, nb_inputs, outputs, nb_outputs, |shapes| {
                op.output_shapes(&attrs, shapes)
            })
        }
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

unsafe extern "C" fn op_supports(
    this: *mut c_void,
    pos: i32,
    io: *const TtrtPortDesc,
    nb_io: i32,
    nb_inputs: i32,
    device: i32,
) -> i32 {
    let body = || -> Option<bool> {
        // SAFETY: the host passes the table's `self_`.
        let (op, _) = unsafe { op_and_attrs(this, std::ptr::null(), 0) }.ok()?;
        // SAFETY: the host passes `nb_io` ports.
        let (ports, pos, nb_inputs, device) =
            unsafe { port_query(pos, io, nb_io, nb_inputs, device) }?;
        Some(op.supports(pos, &ports, nb_inputs, device))
    };
    i32::from(catch_unwind(AssertUnwindSafe(body)).ok().flatten() == Some(true))
}

unsafe extern "C" fn op_cpu_kernel(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    l: *const TtrtLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: forwarded from the host.
    unsafe {
        run_kernel(
            this,
            attrs,
            nb_attrs,
            l,
            err,
            |op, attrs, launch| match launch {
                Launch::Cpu(c) => op.cpu_kernel(attrs, c),
                Launch::Cuda(_) => Err(invalid("cpu_kernel called with a CUDA launch".into())),
            },
        )
    }
}

unsafe extern "C" fn op_cuda_kernel(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    l: *const TtrtLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: forwarded from the host.
    unsafe {
        run_kernel(
            this,
            attrs,
            nb_attrs,
            l,
            err,
            |op, attrs, launch| match launch {
                Launch::Cuda(c) => op.cuda_kernel(attrs, &c),
                Launch::Cpu(_) => Err(invalid("cuda_kernel called with a CPU launch".into())),
            },
        )
    }
}

/// The body of a kernel entry point: the op, its attributes and the launch handed to `f`,
/// errors and panics reported through `err`.
///
/// # Safety
/// `this` and `nb_attrs` fields are the table's, `l` is a launch whose buffers match their
/// descriptions, and `err` a valid error buffer or NULL.
unsafe fn run_kernel(
    this: *mut c_void,
    attrs: *const TtrtField,
    nb_attrs: i32,
    l: *const TtrtLaunch,
    err: *mut TtrtErrorBuf,
    f: impl FnOnce(&dyn CustomOp, &FieldCollection, Launch<'_, '_>) -> PluginResult<()>,
) -> TtrtStatus {
    let body = || {
        // SAFETY: by the caller's promise.
        let (op, attrs) = unsafe { op_and_attrs(this, attrs, nb_attrs) }?;
        // SAFETY: by the caller's promise.
        unsafe { launch::run(l, |launch| f(op, &attrs, launch)) }
    };
    // SAFETY: by the caller's promise.
    unsafe { guard(err, body) }
}

/// A custom op provided by a loaded library; it keeps the library loaded.
pub struct ForeignCustomOp {
    _lib: Arc<LibHandle>,
    this: *mut c_void,
    raw: TtrtCustomOp,
    fns: OpFns,
    domain: String,
    op_type: String,
    num_inputs: usize,
    num_outputs: usize,
    schema: Vec<FieldSpec>,
}

struct OpFns {
    output_dtypes: super::ext_types::TtrtOpDtypesFn,
    output_shapes: super::ext_types::TtrtOpShapesFn,
    supports: TtrtSupportsFn,
    cpu_kernel: TtrtOpKernelFn,
}

// SAFETY: `torchtrt_plugin.h` requires a custom op's functions to be callable from any
// thread, concurrently; everything else here is immutable.
unsafe impl Send for ForeignCustomOp {}
// SAFETY: as for `Send`.
unsafe impl Sync for ForeignCustomOp {}

impl ForeignCustomOp {
    /// Reads and checks a custom-op table.
    ///
    /// # Safety
    /// `raw` is NULL or a custom-op table valid while `lib` is alive.
    pub(crate) unsafe fn new(
        lib: Arc<LibHandle>,
        raw: *const TtrtCustomOp,
    ) -> Result<ForeignCustomOp, String> {
        if !raw.is_aligned() {
            return Err("custom-op table is not aligned".into());
        }
        // SAFETY: NULL or valid by the caller's promise.
        let c = unsafe { raw.as_ref() }.ok_or("custom-op table is NULL")?;
        if c.abi_version != TTRT_CUSTOM_OP_ABI_VERSION {
            return Err(format!(
                "custom-op table version {}; this host speaks version {TTRT_CUSTOM_OP_ABI_VERSION}",
                c.abi_version
            ));
        }
        // SAFETY: NUL-terminated strings by the ABI's rules.
        let (domain, op_type) = unsafe {
            (
                ptr::string(c.domain, "custom op domain")?,
                ptr::string(c.op_type, "custom op type")?,
            )
        };
        let label = format!("custom op {domain}::{op_type}");
        if op_type.is_empty() {
            return Err(format!("{label}: empty op type"));
        }
        let null = |what: &str| format!("{label}: `{what}` is NULL");
        let fns = OpFns {
            output_dtypes: c.output_dtypes.ok_or_else(|| null("output_dtypes"))?,
            output_shapes: c.output_shapes.ok_or_else(|| null("output_shapes"))?,
            supports: c.supports.ok_or_else(|| null("supports"))?,
            cpu_kernel: c.cpu_kernel.ok_or_else(|| null("cpu_kernel"))?,
        };
        // SAFETY: `nb_attributes` schema entries by the ABI's rules.
        let schema = unsafe { read_schema(c.attributes, c.nb_attributes) }
            .map_err(|e| format!("{label}: {e}"))?;
        let count = |n: i32, what: &str| ptr::count(n, what).map_err(|e| format!("{label}: {e}"));
        Ok(ForeignCustomOp {
            _lib: lib,
            this: c.self_,
            raw: *c,
            fns,
            num_inputs: count(c.nb_inputs, "inputs")?,
            num_outputs: count(c.nb_outputs, "outputs")?,
            domain,
            op_type,
            schema,
        })
    }

    fn call(&self, f: impl FnOnce(*mut TtrtErrorBuf) -> TtrtStatus) -> PluginResult<()> {
        let mut buf = ErrorBuf::new();
        let mut err = buf.raw();
        match f(&mut err) {
            TTRT_OK => Ok(()),
            s => Err(error_of_status(
                s,
                format!(
                    "custom op {}::{}: {}",
                    self.domain,
                    self.op_type,
                    buf.message()
                ),
            )),
        }
    }

    fn raw_attrs(&self, attrs: &FieldCollection) -> PluginResult<(RawFields, i32)> {
        let raw =
            RawFields::new(attrs.iter().map(|f| (f.name.as_str(), &f.value))).map_err(invalid)?;
        let n = ptr::to_count(raw.as_slice().len(), "attributes").map_err(invalid)?;
        Ok((raw, n))
    }

    fn kernel(
        &self,
        f: TtrtOpKernelFn,
        attrs: &FieldCollection,
        l: &TtrtLaunch,
    ) -> PluginResult<()> {
        let (raw, n) = self.raw_attrs(attrs)?;
        // SAFETY: the table's function on its own `self`; `l` describes live buffers.
        self.call(|err| unsafe { f(self.this, raw.as_slice().as_ptr(), n, l, err) })
    }
}

impl CustomOp for ForeignCustomOp {
    fn domain(&self) -> String {
        self.domain.clone()
    }

    fn op_type(&self) -> String {
        self.op_type.clone()
    }

    fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    fn attributes(&self) -> Vec<FieldSpec> {
        self.schema.clone()
    }

    fn output_dtypes(&self, attrs: &FieldCollection, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        let (raw, na) = self.raw_attrs(attrs)?;
        let ins: Vec<i32> = inputs.iter().map(|&d| d as i32).collect();
        let mut outs = vec![-1i32; self.num_outputs];
        let ni = ptr::to_count(ins.len(), "inputs").map_err(invalid)?;
        let no = ptr::to_count(outs.len(), "outputs").map_err(invalid)?;
        // SAFETY: the table's function on its own `self`; arrays hold their counts.
        self.call(|err| unsafe {
            (self.fns.output_dtypes)(
                self.this,
                raw.as_slice().as_ptr(),
                na,
                ins.as_ptr(),
                ni,
                outs.as_mut_ptr(),
                no,
                err,
            )
        })?;
        outs.iter()
            .map(|&d| {
                DType::from_raw(d).ok_or_else(|| {
                    PluginError::Execution(format!(
                        "custom op {}::{} gave unknown dtype {d}",
                        self.domain, self.op_type
                    ))
                })
            })
            .collect()
    }

    fn output_shapes(
        &self,
        attrs: &FieldCollection,
        inputs: &[ShapeExpr],
    ) -> PluginResult<Vec<ShapeExpr>> {
        let (raw, na) = self.raw_attrs(attrs)?;
        let arena = DimArena::new();
        let ins = inputs
            .iter()
            .map(|s| arena.push_shape(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let empty = TtrtShapeExpr {
            nb_dims: -1,
            reserved: 0,
            dims: [TTRT_DIM_INVALID; TTRT_MAX_DIMS],
        };
        let mut outs = vec![empty; self.num_outputs];
        let ni = ptr::to_count(ins.len(), "inputs").map_err(invalid)?;
        let no = ptr::to_count(outs.len(), "outputs").map_err(invalid)?;
        let builder = arena.builder();
        // SAFETY: the table's function on its own `self`; arrays hold their counts and the
        // arena outlives the call.
        self.call(|err| unsafe {
            (self.fns.output_shapes)(
                self.this,
                raw.as_slice().as_ptr(),
                na,
                ins.as_ptr(),
                ni,
                outs.as_mut_ptr(),
                no,
                &builder,
                err,
            )
        })?;
        outs.iter()
            .map(|s| arena.read_shape(s).map_err(PluginError::Execution))
            .collect()
    }

    fn supports(&self, pos: usize, io: &[PortDesc], num_inputs: usize, device: DeviceKind) -> bool {
        if device == DeviceKind::Cuda && self.raw.cuda_kernel.is_none() {
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
        if pos >= nb_io {
            return false;
        }
        // SAFETY: the table's function on its own `self`; `ports` holds `nb_io > pos` entries.
        unsafe {
            (self.fns.supports)(self.this, pos, ports.as_ptr(), nb_io, nb_in, device as i32) == 1
        }
    }

    fn cpu_kernel(&self, attrs: &FieldCollection, c: CpuLaunch<'_, '_>) -> PluginResult<()> {
        launch::cpu(c, |l| self.kernel(self.fns.cpu_kernel, attrs, l))
    }

    fn has_cuda_kernel(&self) -> bool {
        self.raw.cuda_kernel.is_some()
    }

    fn cuda_kernel(&self, attrs: &FieldCollection, c: &CudaLaunch<'_>) -> PluginResult<()> {
        let f = self.raw.cuda_kernel.ok_or_else(|| {
            PluginError::Unsupported(format!(
                "custom op {}::{} has no CUDA kernel",
                self.domain, self.op_type
            ))
        })?;
        launch::cuda(c, |l| self.kernel(f, attrs, l))
    }
}
