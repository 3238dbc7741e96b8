//! Rust creators as a C extension: the tables `torchtrt_extension_v1` returns, their
//! trampolines, and the [`export_plugins!`](crate::export_plugins) macro.

use std::ffi::{CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use super::converter::ExportedConverter;
use super::custom_op::ExportedCustomOp;
use super::export_plugin::export_plugin;
use super::ext_types::{TtrtConverter, TtrtCustomOp};
use super::fields::read_fields;
use super::ptr;
use super::schema::RawSchema;
use super::status::{guard, panic_message};
use super::types::{
    TTRT_ABI_VERSION, TtrtCreator, TtrtErrorBuf, TtrtExtension, TtrtField, TtrtPlugin, TtrtStatus,
};
use crate::converter::Converter;
use crate::custom_op::CustomOp;
use crate::error::PluginError;
use crate::plugin::{PluginCreator, create_plugin};

/// Exports plugin creators from a `cdylib` as the C entry point `torchtrt_extension_v1`.
///
/// ```
/// use std::sync::Arc;
/// use torchtrt_plugin_api::abi::Extension;
/// use torchtrt_plugin_api::{FieldCollection, FieldSpec, Plugin, PluginCreator, PluginError};
/// use torchtrt_plugin_api::{PluginKey, PluginResult};
///
/// struct NothingCreator;
///
/// impl PluginCreator for NothingCreator {
///     fn key(&self) -> PluginKey {
///         PluginKey::new("my_lib", "Nothing", "1")
///     }
///     fn field_schema(&self) -> Vec<FieldSpec> {
///         Vec::new()
///     }
///     fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
///         Err(PluginError::Unsupported("Nothing creates nothing".into()))
///     }
/// }
///
/// fn creators() -> Vec<Arc<dyn PluginCreator>> {
///     vec![Arc::new(NothingCreator)]
/// }
///
/// torchtrt_plugin_api::export_plugins!(provider = "my_lib 0.1.0", creators = creators);
///
/// // SAFETY: the entry point the macro generated keeps the ABI's contract.
/// let ext = unsafe { Extension::from_entry(torchtrt_extension_v1, "my_lib") };
/// assert_eq!(ext.expect("readable tables").provider(), "my_lib 0.1.0");
/// ```
///
/// The tables are built once, on the first call; a panic while building them makes the entry
/// point return NULL, which hosts report as a failed library.
#[macro_export]
macro_rules! export_plugins {
    (provider = $provider:expr, creators = $creators:path $(,)?) => {
        /// The torchtrt extension entry point (ABI version 1).
        #[unsafe(no_mangle)]
        pub extern "C" fn torchtrt_extension_v1() -> *const $crate::abi::TtrtExtension {
            static EXTENSION: $crate::abi::ExtensionCell = $crate::abi::ExtensionCell::new();
            $crate::abi::export_entry(&EXTENSION, $provider, $creators)
        }
    };
}

/// Exports plugin creators, custom converters and custom ops from a `cdylib` as the C entry
/// point `torchtrt_extension_v1`. Each list is a function returning a `Vec` of trait
/// objects; any of them may be left out, but those given keep this order.
///
/// ```
/// use std::sync::Arc;
/// use torchtrt_plugin_api::abi::Extension;
/// use torchtrt_plugin_api::{Converter, ConverterNode, ConverterOp, NetworkBuilder};
/// use torchtrt_plugin_api::{PluginResult, TensorHandle, UnaryOp};
///
/// struct ReluTwice;
///
/// impl Converter for ReluTwice {
///     fn op(&self) -> ConverterOp {
///         ConverterOp::new("my_lib", "ReluTwice")
///     }
///     fn convert(
///         &self,
///         node: &ConverterNode,
///         net: &mut dyn NetworkBuilder,
///     ) -> PluginResult<Vec<TensorHandle>> {
///         let y = net.add_unary(UnaryOp::Relu, node.input(0)?)?;
///         Ok(vec![net.add_unary(UnaryOp::Relu, y)?])
///     }
/// }
///
/// fn converters() -> Vec<Arc<dyn Converter>> {
///     vec![Arc::new(ReluTwice)]
/// }
///
/// torchtrt_plugin_api::export_extension!(provider = "my_lib 0.1.0", converters = converters);
///
/// // SAFETY: the entry point the macro generated keeps the ABI's contract.
/// let ext = unsafe { Extension::from_entry(torchtrt_extension_v1, "my_lib") }.unwrap();
/// assert_eq!(ext.converters()[0].op().op_type, "ReluTwice");
/// ```
#[macro_export]
macro_rules! export_extension {
    (
        provider = $provider:expr
        $(, plugins = $plugins:path)?
        $(, converters = $converters:path)?
        $(, custom_ops = $custom_ops:path)?
        $(,)?
    ) => {
        /// The torchtrt extension entry point (ABI version 1).
        #[unsafe(no_mangle)]
        pub extern "C" fn torchtrt_extension_v1() -> *const $crate::abi::TtrtExtension {
            static EXTENSION: $crate::abi::ExtensionCell = $crate::abi::ExtensionCell::new();
            $crate::abi::export_parts_entry(&EXTENSION, $provider, || {
                #[allow(unused_mut)]
                let mut parts = $crate::abi::ExtensionParts::default();
                $(parts.plugins = $plugins();)?
                $(parts.converters = $converters();)?
                $(parts.custom_ops = $custom_ops();)?
                parts
            })
        }
    };
}

/// Where an exported library keeps its tables (one per library).
pub type ExtensionCell = OnceLock<Option<ExportedExtension>>;

/// Everything a Rust library exports: plugin creators, converters and custom ops.
#[derive(Default)]
pub struct ExtensionParts {
    /// Plugin creators.
    pub plugins: Vec<Arc<dyn PluginCreator>>,
    /// Custom converters.
    pub converters: Vec<Arc<dyn Converter>>,
    /// Custom ops.
    pub custom_ops: Vec<Arc<dyn CustomOp>>,
}

/// The body of the entry point [`export_plugins!`](crate::export_plugins) generates: builds
/// the tables in `cell` on the first call and returns them, or NULL when building failed.
pub fn export_entry(
    cell: &ExtensionCell,
    provider: &str,
    creators: fn() -> Vec<Arc<dyn PluginCreator>>,
) -> *const TtrtExtension {
    export_parts_entry(cell, provider, || ExtensionParts {
        plugins: creators(),
        ..ExtensionParts::default()
    })
}

/// The body of the entry point [`export_extension!`](crate::export_extension) generates:
/// builds the tables of `parts()` in `cell` on the first call and returns them, or NULL when
/// building failed (the reason goes to stderr).
pub fn export_parts_entry(
    cell: &ExtensionCell,
    provider: &str,
    parts: impl FnOnce() -> ExtensionParts,
) -> *const TtrtExtension {
    let built = cell.get_or_init(|| {
        match catch_unwind(AssertUnwindSafe(|| {
            ExportedExtension::with_parts(provider, parts())
        })) {
            Ok(Ok(ext)) => Some(ext),
            Ok(Err(reason)) => {
                eprintln!("torchtrt extension {provider}: {reason}");
                None
            }
            Err(payload) => {
                eprintln!(
                    "torchtrt extension {provider}: panicked: {}",
                    panic_message(payload)
                );
                None
            }
        }
    });
    built
        .as_ref()
        .map_or(std::ptr::null(), ExportedExtension::as_ptr)
}

/// The C tables of a set of Rust creators. The pointer [`ExportedExtension::as_ptr`] gives
/// stays valid while the value is neither moved nor dropped (a `static` in practice).
pub struct ExportedExtension {
    raw: TtrtExtension,
    _provider: CString,
    creators: Vec<*mut ExportedCreator>,
    _creator_ptrs: Vec<*const TtrtCreator>,
    converters: Vec<*mut ExportedConverter>,
    _converter_ptrs: Vec<*const TtrtConverter>,
    custom_ops: Vec<*mut ExportedCustomOp>,
    _custom_op_ptrs: Vec<*const TtrtCustomOp>,
}

// SAFETY: the tables are immutable after construction and the creators behind them are
// `Send + Sync`.
unsafe impl Send for ExportedExtension {}
// SAFETY: as for `Send`.
unsafe impl Sync for ExportedExtension {}

impl ExportedExtension {
    /// Builds the tables; an error when a string holds a NUL byte or a count overflows.
    pub fn new(
        provider: &str,
        creators: Vec<Arc<dyn PluginCreator>>,
    ) -> Result<ExportedExtension, String> {
        ExportedExtension::with_parts(
            provider,
            ExtensionParts {
                plugins: creators,
                ..ExtensionParts::default()
            },
        )
    }

    /// Builds the tables of creators, converters and custom ops.
    pub fn with_parts(provider: &str, parts: ExtensionParts) -> Result<ExportedExtension, String> {
        let creators = parts.plugins;
        let provider_c = CString::new(provider)
            .map_err(|_| format!("provider {provider:?} contains a NUL byte"))?;
        let mut ext = ExportedExtension {
            raw: TtrtExtension {
                abi_version: TTRT_ABI_VERSION,
                nb_creators: ptr::to_count(creators.len(), "creators")?,
                provider: provider_c.as_ptr(),
                creators: std::ptr::null(),
                nb_converters: ptr::to_count(parts.converters.len(), "converters")?,
                reserved0: 0,
                converters: std::ptr::null(),
                nb_custom_ops: ptr::to_count(parts.custom_ops.len(), "custom ops")?,
                reserved1: 0,
                custom_ops: std::ptr::null(),
            },
            _provider: provider_c,
            creators: Vec::with_capacity(creators.len()),
            _creator_ptrs: Vec::with_capacity(creators.len()),
            converters: Vec::new(),
            _converter_ptrs: Vec::new(),
            custom_ops: Vec::new(),
            _custom_op_ptrs: Vec::new(),
        };
        for c in creators {
            let exported = Box::into_raw(Box::new(ExportedCreator::new(c)?));
            ext.creators.push(exported);
            // SAFETY: `exported` is a live, uniquely owned allocation.
            unsafe { (*exported).raw.self_ = exported.cast::<c_void>() };
            // SAFETY: as above; the field's address is stable until the box is freed.
            ext._creator_ptrs
                .push(unsafe { &raw const (*exported).raw });
        }
        ext.raw.creators = ext._creator_ptrs.as_ptr();
        for c in parts.converters {
            let exported = Box::into_raw(Box::new(ExportedConverter::new(c)?));
            ext.converters.push(exported);
            // SAFETY: `exported` is a live, uniquely owned allocation whose address is stable
            // until the box is freed.
            unsafe {
                (*exported).raw.self_ = exported.cast::<c_void>();
                ext._converter_ptrs.push(&raw const (*exported).raw);
            }
        }
        for o in parts.custom_ops {
            let exported = Box::into_raw(Box::new(ExportedCustomOp::new(o)?));
            ext.custom_ops.push(exported);
            // SAFETY: as above.
            unsafe {
                (*exported).raw.self_ = exported.cast::<c_void>();
                ext._custom_op_ptrs.push(&raw const (*exported).raw);
            }
        }
        if !ext._converter_ptrs.is_empty() {
            ext.raw.converters = ext._converter_ptrs.as_ptr();
        }
        if !ext._custom_op_ptrs.is_empty() {
            ext.raw.custom_ops = ext._custom_op_ptrs.as_ptr();
        }
        Ok(ext)
    }

    /// The table to return from the entry point.
    pub fn as_ptr(&self) -> *const TtrtExtension {
        &self.raw
    }
}

impl Drop for ExportedExtension {
    fn drop(&mut self) {
        for c in self.creators.drain(..) {
            // SAFETY: made by `Box::into_raw` in `new` and freed only here.
            drop(unsafe { Box::from_raw(c) });
        }
        for c in self.converters.drain(..) {
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(c) });
        }
        for o in self.custom_ops.drain(..) {
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(o) });
        }
    }
}

/// One creator's C table and the Rust creator behind it.
struct ExportedCreator {
    raw: TtrtCreator,
    creator: Arc<dyn PluginCreator>,
    _strings: [CString; 3],
    _schema: RawSchema,
}

impl ExportedCreator {
    fn new(creator: Arc<dyn PluginCreator>) -> Result<ExportedCreator, String> {
        let key = creator.key();
        let c = |s: &str| CString::new(s).map_err(|_| format!("plugin {key}: NUL byte in its key"));
        let strings = [c(&key.namespace)?, c(&key.name)?, c(&key.version)?];
        let schema =
            RawSchema::new(&creator.field_schema()).map_err(|e| format!("plugin {key}: {e}"))?;
        Ok(ExportedCreator {
            raw: TtrtCreator {
                self_: std::ptr::null_mut(),
                plugin_namespace: strings[0].as_ptr(),
                name: strings[1].as_ptr(),
                version: strings[2].as_ptr(),
                fields: schema.as_slice().as_ptr(),
                nb_fields: ptr::to_count(schema.as_slice().len(), "schema fields")?,
                capabilities: creator.capabilities().bits() as i32,
                create: Some(creator_create),
            },
            creator,
            _strings: strings,
            _schema: schema,
        })
    }
}

/// `TtrtCreator::create` for Rust creators: validates the fields against the schema, fills
/// in defaults and creates the plugin.
unsafe extern "C" fn creator_create(
    this: *mut c_void,
    layer_name: *const c_char,
    fields: *const TtrtField,
    nb_fields: i32,
    out: *mut *mut TtrtPlugin,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    let body = || {
        // SAFETY: `this` is the `ExportedCreator` this table was made for.
        let c = unsafe { this.cast::<ExportedCreator>().cast_const().as_ref() }
            .ok_or_else(|| PluginError::InvalidInput("create: creator is NULL".into()))?;
        let key = c.creator.key();
        let bad = |e: String| PluginError::InvalidInput(format!("plugin {key}: {e}"));
        // SAFETY: the host passes a NUL-terminated name.
        let layer = unsafe { ptr::string(layer_name, "layer name") }.map_err(bad)?;
        // SAFETY: the host passes `nb_fields` valid fields.
        let fields = unsafe { read_fields(fields, nb_fields) }.map_err(bad)?;
        if out.is_null() {
            return Err(bad("create: output pointer is NULL".into()));
        }
        let plugin = create_plugin(c.creator.as_ref(), &layer, &fields)?;
        // SAFETY: non-NULL; the host passes a writable pointer.
        unsafe { out.write(export_plugin(plugin)) };
        Ok(())
    };
    // SAFETY: the host passes a valid error buffer or NULL.
    unsafe { guard(err, body) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panicking() -> Vec<Arc<dyn PluginCreator>> {
        panic!("no creators today")
    }

    #[test]
    fn a_panic_while_building_gives_null_for_good() {
        static CELL: ExtensionCell = ExtensionCell::new();
        assert!(export_entry(&CELL, "p 1", panicking).is_null());
        assert!(export_entry(&CELL, "p 1", Vec::new).is_null());
    }

    #[test]
    fn builds_once_and_refuses_nul_bytes() {
        static CELL: ExtensionCell = ExtensionCell::new();
        let first = export_entry(&CELL, "p 1", Vec::new);
        assert!(!first.is_null());
        assert_eq!(export_entry(&CELL, "p 1", Vec::new), first);
        assert!(ExportedExtension::new("p\0", Vec::new()).is_err());
    }
}
