//! Loading extension libraries into the registry.

use std::path::{Path, PathBuf};

use torchtrt_plugin_api::abi::Extension;

use crate::error::{Error, Result};
use crate::registry::{LibraryInfo, PluginRegistry};

impl PluginRegistry {
    /// Loads a shared library exporting `torchtrt_extension_v1` and registers its plugin
    /// creators, and the creators derived from its custom ops, under the library's provider
    /// name (see [`PluginRegistry::register_extension`]). Its converters are not the
    /// registry's business: `torchtrt::load_extensions` adds them to the ONNX importer too.
    pub fn load_library(&self, path: impl AsRef<Path>) -> Result<LibraryInfo> {
        let ext = Extension::load(path.as_ref())?;
        self.register_extension(&ext)
    }

    /// Registers the plugin creators of a loaded library and those derived from its custom
    /// ops (namespace = the op's domain, name = its op type, version `1`), recording the
    /// library so engines name it. Registering a library whose keys are already registered by
    /// the same provider (e.g. `libtorchtrt_plugins.so` into a process with the built-ins
    /// baked in) registers nothing and is not an error; a key held by another provider
    /// refuses the whole library and leaves the registry as it was.
    pub fn register_extension(&self, ext: &Extension) -> Result<LibraryInfo> {
        let path = ext.path();
        let canonical: PathBuf = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if let Some((_, provider)) = self.libraries().into_iter().find(|(p, _)| *p == canonical) {
            return Ok(LibraryInfo {
                path: canonical,
                provider,
                registered: Vec::new(),
            });
        }
        let mut creators = ext.creators();
        creators.extend(ext.custom_op_creators());
        let registered = self
            .register_all(creators, ext.provider(), Some(&canonical))
            .map_err(|e| Error::Library {
                path: path.display().to_string(),
                reason: match e {
                    Error::Registry(m) => m,
                    other => other.to_string(),
                },
            })?;
        tracing::debug!(library = %canonical.display(), provider = ext.provider(), count = registered.len(), "loaded plugin library");
        Ok(LibraryInfo {
            path: canonical,
            provider: ext.provider().to_string(),
            registered,
        })
    }

    /// Removes the creators a library registered. Plugins already created from it keep
    /// the library mapped until they are dropped.
    pub fn unload_library(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.remove_library(&canonical)
            .ok_or_else(|| Error::Registry(format!("library {} is not loaded", path.display())))
    }
}
