//! Converters across the ABI: a Rust [`Converter`] as a `TtrtConverter` table (library
//! side) and a `TtrtConverter` table as a Rust [`Converter`] (host side).

use std::ffi::{CString, c_void};
use std::sync::Arc;

use super::builder_foreign::{ForeignBuilder, error_of_status};
use super::builder_host::HostBuilder;
use super::ext_types::{
    TTRT_CONVERTER_ABI_VERSION, TTRT_TENSOR_NONE, TtrtConvertFn, TtrtConverter, TtrtNetworkBuilder,
    TtrtNode, TtrtTensorHandle,
};
use super::fields::{RawFields, read_fields};
use super::host::LibHandle;
use super::ptr;
use super::status::{ErrorBuf, guard};
use super::types::{TTRT_OK, TtrtErrorBuf, TtrtStatus};
use crate::converter::{Converter, ConverterNode, ConverterOp, NetworkBuilder, TensorHandle};
use crate::error::{PluginError, PluginResult};

/// The C view of a node; owns every byte it points to.
struct RawNode {
    _strings: [CString; 3],
    _attrs: RawFields,
    _inputs: Vec<TtrtTensorHandle>,
    raw: TtrtNode,
}

impl RawNode {
    fn new(node: &ConverterNode) -> Result<RawNode, String> {
        let c = |s: &str| CString::new(s).map_err(|_| format!("NUL byte in {s:?}"));
        let strings = [c(&node.name)?, c(&node.op_type)?, c(&node.domain)?];
        let attrs = RawFields::new(node.attributes.iter().map(|f| (f.name.as_str(), &f.value)))?;
        let inputs: Vec<i64> = node
            .inputs
            .iter()
            .map(|h| h.map_or(TTRT_TENSOR_NONE, |h| h.0))
            .collect();
        let raw = TtrtNode {
            name: strings[0].as_ptr(),
            op_type: strings[1].as_ptr(),
            domain: strings[2].as_ptr(),
            opset: node.opset,
            attributes: attrs.as_slice().as_ptr(),
            nb_attributes: ptr::to_count(attrs.as_slice().len(), "attributes")?,
            nb_inputs: ptr::to_count(inputs.len(), "inputs")?,
            inputs: inputs.as_ptr(),
            nb_outputs: ptr::to_count(node.num_outputs, "outputs")?,
            reserved: 0,
        };
        Ok(RawNode {
            _strings: strings,
            _attrs: attrs,
            _inputs: inputs,
            raw,
        })
    }
}

/// Reads a node the host passed.
///
/// # Safety
/// `node` is NULL or valid as `torchtrt_plugin.h` describes.
unsafe fn read_node(node: *const TtrtNode) -> Result<ConverterNode, String> {
    // SAFETY: by the caller's promise.
    let n = unsafe { node.as_ref() }.ok_or("node is NULL")?;
    // SAFETY: strings, attributes and inputs as the header prescribes.
    unsafe {
        let inputs = ptr::slice(n.inputs, ptr::count(n.nb_inputs, "inputs")?, "inputs")?;
        Ok(ConverterNode {
            name: ptr::string(n.name, "node name")?,
            op_type: ptr::string(n.op_type, "op type")?,
            domain: ptr::string(n.domain, "domain")?,
            opset: n.opset,
            attributes: read_fields(n.attributes, n.nb_attributes)?,
            inputs: inputs
                .iter()
                .map(|&h| (h != TTRT_TENSOR_NONE).then_some(TensorHandle(h)))
                .collect(),
            num_outputs: ptr::count(n.nb_outputs, "outputs")?,
        })
    }
}

/// A Rust converter's C table; `raw.self_` points at this value once boxed.
pub(crate) struct ExportedConverter {
    pub(crate) raw: TtrtConverter,
    converter: Arc<dyn Converter>,
    _strings: [CString; 2],
}

impl ExportedConverter {
    /// The table of `converter`; `self_` is set by the caller once the value has its address.
    pub(crate) fn new(converter: Arc<dyn Converter>) -> Result<ExportedConverter, String> {
        let op = converter.op();
        let c = |s: &str| {
            CString::new(s)
                .map_err(|_| format!("converter {}::{}: NUL byte", op.domain, op.op_type))
        };
        let strings = [c(&op.domain)?, c(&op.op_type)?];
        Ok(ExportedConverter {
            raw: TtrtConverter {
                abi_version: TTRT_CONVERTER_ABI_VERSION,
                reserved: 0,
                self_: std::ptr::null_mut(),
                domain: strings[0].as_ptr(),
                op_type: strings[1].as_ptr(),
                since_opset: op.since_opset,
                until_opset: op.until_opset.unwrap_or(-1),
                convert: Some(converter_convert),
            },
            converter,
            _strings: strings,
        })
    }
}

unsafe extern "C" fn converter_convert(
    this: *mut c_void,
    node: *const TtrtNode,
    net: *const TtrtNetworkBuilder,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        let invalid = PluginError::InvalidInput;
        // SAFETY: `this` is the `ExportedConverter` this table was made for.
        let c = unsafe { this.cast::<ExportedConverter>().cast_const().as_ref() }
            .ok_or_else(|| invalid("convert: converter is NULL".into()))?;
        // SAFETY: the host passes a valid node.
        let node = unsafe { read_node(node) }.map_err(invalid)?;
        // SAFETY: the host passes a valid builder for this call.
        let raw =
            unsafe { net.as_ref() }.ok_or_else(|| invalid("convert: builder is NULL".into()))?;
        let mut builder = ForeignBuilder::new(raw)?;
        let outs = c.converter.convert(&node, &mut builder)?;
        if outs.len() != node.num_outputs {
            return Err(invalid(format!(
                "the converter returned {} outputs; the node has {}",
                outs.len(),
                node.num_outputs
            )));
        }
        outs.into_iter()
            .enumerate()
            .try_for_each(|(i, t)| builder.set_output(i, t))
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

/// A converter provided by a loaded library; it keeps the library loaded.
pub struct ForeignConverter {
    _lib: Arc<LibHandle>,
    this: *mut c_void,
    convert: TtrtConvertFn,
    op: ConverterOp,
}

// SAFETY: `torchtrt_plugin.h` requires `convert` to be callable from any thread,
// concurrently; everything else here is immutable.
unsafe impl Send for ForeignConverter {}
// SAFETY: as for `Send`.
unsafe impl Sync for ForeignConverter {}

impl ForeignConverter {
    /// Reads and checks a converter table.
    ///
    /// # Safety
    /// `raw` is NULL or a converter table valid while `lib` is alive.
    pub(crate) unsafe fn new(
        lib: Arc<LibHandle>,
        raw: *const TtrtConverter,
    ) -> Result<ForeignConverter, String> {
        if !raw.is_aligned() {
            return Err("converter table is not aligned".into());
        }
        // SAFETY: NULL or valid by the caller's promise.
        let c = unsafe { raw.as_ref() }.ok_or("converter table is NULL")?;
        if c.abi_version != TTRT_CONVERTER_ABI_VERSION {
            return Err(format!(
                "converter table version {}; this host speaks version {TTRT_CONVERTER_ABI_VERSION}",
                c.abi_version
            ));
        }
        // SAFETY: NUL-terminated strings by the ABI's rules.
        let (domain, op_type) = unsafe {
            (
                ptr::string(c.domain, "converter domain")?,
                ptr::string(c.op_type, "converter op type")?,
            )
        };
        let label = format!("converter {domain}::{op_type}");
        if op_type.is_empty() {
            return Err(format!("{label}: empty op type"));
        }
        let until = match c.until_opset {
            -1 => None,
            u if u >= c.since_opset => Some(u),
            u => {
                return Err(format!(
                    "{label}: opset range {}..={u} is empty",
                    c.since_opset
                ));
            }
        };
        if c.since_opset < 1 {
            return Err(format!("{label}: since_opset {} is below 1", c.since_opset));
        }
        let convert = c
            .convert
            .ok_or_else(|| format!("{label}: `convert` is NULL"))?;
        Ok(ForeignConverter {
            _lib: lib,
            this: c.self_,
            convert,
            op: ConverterOp {
                domain,
                op_type,
                since_opset: c.since_opset,
                until_opset: until,
            },
        })
    }
}

impl Converter for ForeignConverter {
    fn op(&self) -> ConverterOp {
        self.op.clone()
    }

    fn convert(
        &self,
        node: &ConverterNode,
        net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>> {
        let raw = RawNode::new(node).map_err(PluginError::InvalidInput)?;
        let mut host = HostBuilder::new(net, node.num_outputs);
        let table = host.table();
        let mut buf = ErrorBuf::new();
        let mut err = buf.raw();
        // SAFETY: the library's `convert` with its own `self`; node and builder outlive the call.
        let status = unsafe { (self.convert)(self.this, &raw.raw, &table, &mut err) };
        if status != TTRT_OK {
            return Err(error_of_status(status, buf.message()));
        }
        host.outputs
            .iter()
            .enumerate()
            .map(|(i, o)| {
                o.ok_or_else(|| {
                    PluginError::InvalidInput(format!("the converter did not set output {i}"))
                })
            })
            .collect()
    }
}
