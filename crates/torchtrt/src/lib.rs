//! torchtrt: compile networks with plugins into engines, serialize them, and run them.
//!
//! ```no_run
//! use torchtrt::{BuildConfig, Dim, NetworkDefinition, Tensor};
//! use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
//!
//! # fn main() -> Result<(), torchtrt::Error> {
//! torchtrt::init_plugins()?;
//! let mut net = NetworkDefinition::new();
//! let x = net.add_input("x", DType::F32, &[Dim::dynamic("n", 1, 4, 16), Dim::Fixed(64)])?;
//! let gelu = PluginKey::new("", "CustomGeluPluginDynamic", "1");
//! let y = net.add_plugin("gelu", torchtrt::registry(), &gelu, &FieldCollection::new(), &[x])?;
//! net.mark_output(y[0], "y")?;
//! let engine = torchtrt::compile(&net, &BuildConfig::default())?;
//! let bytes = engine.serialize();
//! let engine = torchtrt::Runtime::new()?.deserialize(&bytes)?;
//! let out = engine.create_context().execute(&[&Tensor::from_vec(&[2, 64], vec![0.5f32; 128])?])?;
//! # Ok(()) }
//! ```

pub mod capi;

mod extensions;

use std::path::Path;
use std::sync::Arc;

pub use extensions::{ExtensionInfo, LoadOptions, load_library, register_extension};

pub use torchtrt_core::engine::MAGIC as ENGINE_MAGIC;
pub use torchtrt_core::{
    Backend, BuildConfig, CreatorInfo, Dim, Engine, EnginePlan, EngineSummary, Error,
    ExecutionContext, IoTensor, Kernel, LayerTiming, LibraryInfo, NetworkDefinition, OnDuplicate,
    PluginRegistry, Result, Target, Tensor, TensorId, layers, registry,
};
pub use torchtrt_cpu::CpuBackend;
pub use torchtrt_onnx as onnx;
pub use torchtrt_plugin_api as plugin_api;

/// Registers the built-in plugin library (`torchtrt_plugins`) in the process-wide registry.
/// Idempotent and thread-safe; [`compile`] and [`Runtime::new`] call it, so neither order
/// nor repetition matters.
pub fn init_plugins() -> Result<()> {
    torchtrt_plugins::init(registry()).map_err(|source| Error::Plugin {
        context: format!("initialising {}", torchtrt_plugins::PROVIDER),
        source,
    })
}

/// The backends available in this process: the CPU, always.
pub fn default_backends() -> Vec<Arc<dyn Backend>> {
    vec![Arc::new(CpuBackend::new())]
}

/// Builds an engine from a network (TensorRT's `buildSerializedNetwork`).
pub fn compile(network: &NetworkDefinition, config: &BuildConfig) -> Result<Engine> {
    init_plugins()?;
    torchtrt_core::build(network, config, &default_backends())
}

/// Reads an ONNX model into a network: built-in converters, exported GELU / normalize
/// patterns fused into plugins, unknown ops looked up in the plugin registry, and layers
/// whose inputs are known evaluated on the CPU while importing.
pub fn import_onnx(
    path: impl AsRef<Path>,
    options: onnx::ImportOptions,
) -> std::result::Result<NetworkDefinition, onnx::OnnxError> {
    init_plugins()?;
    let options = onnx::ImportOptions {
        evaluator: options
            .evaluator
            .or_else(|| default_backends().into_iter().next()),
        ..options
    };
    onnx::import_file(path, registry(), &options)
}

/// Deserializes engines, with the built-in plugins registered and the default backends.
#[derive(Clone)]
pub struct Runtime {
    inner: torchtrt_core::Runtime,
}

impl Runtime {
    /// A runtime over the default backends; registers the built-in plugins.
    pub fn new() -> Result<Runtime> {
        init_plugins()?;
        Ok(Runtime {
            inner: torchtrt_core::Runtime::new(default_backends()),
        })
    }

    /// Loads an extension library (plugins) into the process-wide registry.
    pub fn load_library(&self, path: impl AsRef<Path>) -> Result<LibraryInfo> {
        registry().load_library(path)
    }

    /// Reads an engine from bytes.
    pub fn deserialize(&self, bytes: &[u8]) -> Result<Engine> {
        self.inner.deserialize(bytes)
    }

    /// Reads an engine from a file.
    pub fn deserialize_file(&self, path: impl AsRef<Path>) -> Result<Engine> {
        self.inner.deserialize_file(path)
    }
}
