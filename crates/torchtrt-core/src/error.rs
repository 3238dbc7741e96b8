//! The error type of torchtrt-core.

use torchtrt_plugin_api::PluginError;

/// Everything that can go wrong building, loading or running an engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A layer's inputs or parameters are invalid (shape or dtype inference failed).
    #[error("layer `{layer}` ({kind}): {message}")]
    Layer {
        /// Layer name.
        layer: String,
        /// Layer kind, e.g. `Convolution`.
        kind: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The network as a whole is malformed (dangling tensor, cycle, no outputs, …).
    #[error("invalid network: {0}")]
    Network(String),
    /// A plugin key has no creator in the registry.
    #[error(
        "plugin {namespace}::{name}@{version} is not registered{}",
        library.as_ref().map(|l| format!(" (the engine was built with it from `{l}`; load that library first)")).unwrap_or_default()
    )]
    PluginNotFound {
        /// Namespace of the missing plugin.
        namespace: String,
        /// Name of the missing plugin.
        name: String,
        /// Version of the missing plugin.
        version: String,
        /// The library that provided it when the engine was built, if known.
        library: Option<String>,
    },
    /// A plugin failed; `context` names the layer or key.
    #[error("{context}: {source}")]
    Plugin {
        /// The layer or plugin key involved.
        context: String,
        /// The plugin's error.
        #[source]
        source: PluginError,
    },
    /// The registry refused an operation (duplicate key, unknown key, …).
    #[error("plugin registry: {0}")]
    Registry(String),
    /// A library could not be opened or read as a torchtrt extension.
    #[error(transparent)]
    Load(#[from] torchtrt_plugin_api::abi::LoadError),
    /// A library loaded but could not be registered (a key clash, …).
    #[error("cannot load plugin library `{path}`: {reason}")]
    Library {
        /// The library path.
        path: String,
        /// Why loading failed.
        reason: String,
    },
    /// An engine file could not be read.
    #[error("invalid engine: {0}")]
    Engine(String),
    /// Inputs given to an execution do not match the engine.
    #[error("invalid input: {0}")]
    Input(String),
    /// A kernel failed while running a layer.
    #[error("layer `{layer}` failed: {message}")]
    Execution {
        /// Layer name.
        layer: String,
        /// What went wrong.
        message: String,
    },
    /// No backend can run a layer on the requested device.
    #[error("no {device} kernel for layer `{layer}` ({kind})")]
    NoKernel {
        /// Layer name.
        layer: String,
        /// Layer kind.
        kind: &'static str,
        /// Requested device.
        device: String,
    },
    /// An argument to a public function is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An I/O error, with the path involved.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
