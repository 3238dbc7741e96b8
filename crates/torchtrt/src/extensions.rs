//! Loading extension libraries: plugins, custom converters and custom ops, all at once.

use std::path::{Path, PathBuf};

use torchtrt_core::plugin_api::PluginKey;
use torchtrt_core::plugin_api::abi::Extension;

use crate::{Error, Result, onnx, registry, torch};

/// How [`load_extensions`] treats a library's converters.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions {
    /// Let the library's converters replace built-in ones for the same op (refused
    /// otherwise); `torchtrtc --override-converters`.
    pub override_converters: bool,
}

/// What a library added to this process.
#[derive(Clone, Debug)]
pub struct ExtensionInfo {
    /// The library's path (canonical), or the label of an in-process entry point.
    pub path: PathBuf,
    /// The library's identity.
    pub provider: String,
    /// Plugin keys newly registered, those derived from custom ops included.
    pub plugins: Vec<PluginKey>,
    /// Converters newly added to the ONNX importer, custom ops' included.
    pub converters: Vec<onnx::ExtensionOp>,
    /// Converters newly added to the PyTorch-program importer (ops of a namespace other
    /// than ONNX's default domain), custom ops' included.
    pub torch_ops: Vec<torch::ExtensionOp>,
}

/// Loads an extension library and adds everything it exports: plugin creators to the
/// registry, custom converters to the ONNX and PyTorch importers, and for each custom op a derived plugin
/// creator (namespace = domain, name = op type, version `1`) and converter. All or nothing:
/// when any part is refused (a plugin key or op another library holds, an op with a built-in
/// converter without [`LoadOptions::override_converters`]) nothing is added. Loading the same
/// library again adds nothing and is not an error.
///
/// Engines record the library of every plugin they use, custom ops' included; a process
/// that deserializes them needs the same library loaded (this function, or
/// [`Runtime::load_plugins`](crate::Runtime::load_plugins), which registers its plugins).
pub fn load_extensions(path: impl AsRef<Path>, options: &LoadOptions) -> Result<ExtensionInfo> {
    let ext = Extension::load(path.as_ref())?;
    register_extension(&ext, options)
}

/// [`load_extensions`] for an extension already loaded (or linked in through
/// [`Extension::from_entry`]).
pub fn register_extension(ext: &Extension, options: &LoadOptions) -> Result<ExtensionInfo> {
    crate::init_plugins()?;
    let path = ext.path();
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut plugins = Vec::new();
    let mut converters = Vec::new();
    let clash = |reason: String| Error::Library {
        path: path.display().to_string(),
        reason,
    };
    let torch_ops =
        torch::register_extension_ops(ext, &canonical, options.override_converters, || {
            converters =
                onnx::register_extension_ops(ext, &canonical, options.override_converters, || {
                    plugins = registry().register_extension(ext)?.registered;
                    Ok(())
                })
                .map_err(|e| match e {
                    onnx::ExtensionError::Plugins(e) => e,
                    other => clash(other.to_string()),
                })?;
            Ok(())
        })
        .map_err(|e| match e {
            torch::ExtensionError::Rest(e) => e,
            other => clash(other.to_string()),
        })?;
    Ok(ExtensionInfo {
        path: canonical,
        provider: ext.provider().to_string(),
        plugins,
        converters,
        torch_ops,
    })
}
