//! A creator table from a library, as a [`PluginCreator`].

use std::ffi::CString;
use std::sync::Arc;

use super::fields::RawFields;
use super::host::LibHandle;
use super::host_plugin::ForeignPlugin;
use super::ptr;
use super::schema::read_schema;
use super::status::{ErrorBuf, context, error_of};
use super::types::{TTRT_OK, TtrtCreateFn, TtrtCreator};
use crate::capabilities::{
    CAPABILITY_SHAPE_INPUTS, CAPABILITY_SIZED_OUTPUTS, CAPABILITY_TACTICS, Capabilities,
};
use crate::error::{PluginError, PluginResult};
use crate::field::{FieldCollection, FieldSpec};
use crate::plugin::{Plugin, PluginCreator, PluginKey};

/// A plugin creator provided by a loaded library; it keeps the library loaded.
pub struct ForeignCreator {
    lib: Arc<LibHandle>,
    this: *mut std::ffi::c_void,
    create: TtrtCreateFn,
    key: PluginKey,
    schema: Vec<FieldSpec>,
    capabilities: Capabilities,
}

// SAFETY: `torchtrt_plugin.h` requires a creator's `create` to be callable from any thread,
// concurrently; everything else here is immutable.
unsafe impl Send for ForeignCreator {}
// SAFETY: as for `Send`.
unsafe impl Sync for ForeignCreator {}

impl ForeignCreator {
    /// Reads and checks a creator table.
    ///
    /// # Safety
    /// `raw` is NULL or a creator table valid while `lib` is alive.
    pub(crate) unsafe fn new(
        lib: Arc<LibHandle>,
        raw: *const TtrtCreator,
    ) -> Result<ForeignCreator, String> {
        if !raw.is_aligned() {
            return Err("creator table is not aligned".to_string());
        }
        // SAFETY: NULL or valid by the caller's promise.
        let c = unsafe { raw.as_ref() }.ok_or("creator table is NULL")?;
        // SAFETY: NUL-terminated strings by the ABI's rules.
        let (namespace, name, version) = unsafe {
            (
                ptr::string(c.plugin_namespace, "namespace")?,
                ptr::string(c.name, "name")?,
                ptr::string(c.version, "version")?,
            )
        };
        if name.is_empty() || version.is_empty() {
            return Err(format!(
                "plugin {namespace}::{name}@{version} has an empty name or version"
            ));
        }
        let key = PluginKey::new(&namespace, &name, &version);
        let create = c
            .create
            .ok_or_else(|| format!("plugin {key}: `create` is NULL"))?;
        // SAFETY: `nb_fields` schema entries by the ABI's rules.
        let schema = unsafe { read_schema(c.fields, c.nb_fields) }
            .map_err(|e| format!("plugin {key}: {e}"))?;
        let known = match lib.version() {
            ..3 => 0,
            3 => CAPABILITY_SHAPE_INPUTS | CAPABILITY_SIZED_OUTPUTS | CAPABILITY_TACTICS,
            _ => u32::MAX,
        };
        let capabilities = Capabilities::from_bits(c.capabilities as u32 & known);
        Ok(ForeignCreator {
            lib,
            this: c.self_,
            create,
            key,
            schema,
            capabilities,
        })
    }
}

impl PluginCreator for ForeignCreator {
    fn key(&self) -> PluginKey {
        self.key.clone()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        self.schema.clone()
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn create(&self, layer_name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let key = &self.key;
        let bad =
            |e: String| PluginError::InvalidInput(format!("{}: {e}", context(key, layer_name)));
        let raw =
            RawFields::new(fields.iter().map(|f| (f.name.as_str(), &f.value))).map_err(bad)?;
        let nb = ptr::to_count(raw.as_slice().len(), "fields").map_err(bad)?;
        let layer =
            CString::new(layer_name).map_err(|_| bad("layer name contains a NUL byte".into()))?;
        let mut out = std::ptr::null_mut();
        let mut buf = ErrorBuf::new();
        let mut err = buf.raw();
        // SAFETY: the library's `create` with its own `self`; every pointer is valid for the call.
        let status = unsafe {
            (self.create)(
                self.this,
                layer.as_ptr(),
                raw.as_slice().as_ptr(),
                nb,
                &mut out,
                &mut err,
            )
        };
        if status != TTRT_OK {
            return Err(error_of(status, &buf.message(), key, layer_name));
        }
        // SAFETY: on success `out` is a plugin table of this library, now owned by the host.
        let plugin = unsafe { ForeignPlugin::new(self.lib.clone(), key.clone(), layer_name, out) }?;
        Ok(Box::new(plugin))
    }
}
