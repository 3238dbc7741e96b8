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
//! let out = engine.create_context()?.execute(&[&Tensor::from_vec(&[2, 64], vec![0.5f32; 128])?])?;
//! # Ok(()) }
//! ```

pub mod capi;

mod calibrate;
mod extensions;
mod pt2;

use std::path::Path;
use std::sync::Arc;

use torchtrt_plugin_api::DeviceKind;

pub use calibrate::{Calibrator, calibrate, calibrate_with};
pub use extensions::{ExtensionInfo, LoadOptions, load_extensions, register_extension};
pub use pt2::{import_program, import_pt2};

pub use torchtrt_core::engine::MAGIC as ENGINE_MAGIC;
pub use torchtrt_core::{
    Backend, BuildConfig, ChannelsLast, CreatorInfo, Dim, Engine, EnginePlan, EngineSummary, Error,
    ExecutionContext, Int8Calibration, IoBuffer, IoTensor, Kernel, LayerTiming, LibraryInfo,
    MemoryKind, NetworkDefinition, OnDuplicate, PluginRegistry, Result, Target, Tensor, TensorId,
    TimingCache, layers, registry,
};
pub use torchtrt_core::{files, kernel_plugin, limits, tensor};
pub use torchtrt_cpu::CpuBackend;
pub use torchtrt_cuda as cuda;
pub use torchtrt_cuda::CudaBackend;
pub use torchtrt_onnx as onnx;
pub use torchtrt_plugin_api as plugin_api;
pub use torchtrt_torch as torch;

/// Registers the built-in plugin library (`torchtrt_plugins`) in the process-wide registry.
/// Idempotent and thread-safe; [`compile`] and [`Runtime::new`] call it, so neither order
/// nor repetition matters.
pub fn init_plugins() -> Result<()> {
    torchtrt_plugins::init(registry()).map_err(|source| Error::Plugin {
        context: format!("initialising {}", torchtrt_plugins::PROVIDER),
        source,
    })
}

/// The backends available in this process: the CPU, always, and every CUDA device present
/// (`cuda:0` first).
pub fn default_backends() -> Vec<Arc<dyn Backend>> {
    let mut backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    backends.extend(
        torchtrt_cuda::backends()
            .into_iter()
            .map(|b| b as Arc<dyn Backend>),
    );
    backends
}

/// The backend a device name selects: `cpu`, `cuda` (`cuda:0`) or `cuda:N`. A CUDA backend
/// is shared by the process, prepares layers without a CUDA kernel on the CPU, and stores
/// the plugins' compiled programs in its engines. Without a GPU the error says
/// "no CUDA device" and why.
pub fn backend_for(device: &str) -> Result<Arc<dyn Backend>> {
    match parse_device(device)? {
        None => Ok(Arc::new(CpuBackend::new())),
        Some(n) => Ok(cuda_backend(n)?),
    }
}

/// The CUDA backend of `cuda:ordinal` (see [`backend_for`]).
pub fn cuda_backend(ordinal: usize) -> Result<Arc<CudaBackend>> {
    torchtrt_cuda::backend(ordinal).map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// `None` for `cpu`, the ordinal for `cuda[:N]`.
fn parse_device(device: &str) -> Result<Option<usize>> {
    let bad = || {
        Error::InvalidArgument(format!(
            "device `{device}` is not `cpu`, `cuda` or `cuda:N`"
        ))
    };
    match device {
        "cpu" => Ok(None),
        "cuda" => Ok(Some(0)),
        _ => device
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .map(Some)
            .ok_or_else(bad),
    }
}

/// Builds an engine from a network (TensorRT's `buildSerializedNetwork`) for
/// `config.device` on the default backends (`cuda:0` for CUDA).
pub fn compile(network: &NetworkDefinition, config: &BuildConfig) -> Result<Engine> {
    init_plugins()?;
    match config.device {
        DeviceKind::Cpu => torchtrt_core::build(network, config, &default_backends()),
        DeviceKind::Cuda => compile_for(network, config, "cuda"),
    }
}

/// Builds an engine for the device `device` names (`cpu`, `cuda`, `cuda:N`; it overrides
/// `config.device`). A CUDA engine is run once at its opt shapes while building, so that
/// the GPU programs of its plugins are compiled and stored in it: running it later needs
/// the CUDA driver only.
pub fn compile_for(
    network: &NetworkDefinition,
    config: &BuildConfig,
    device: &str,
) -> Result<Engine> {
    init_plugins()?;
    let Some(ordinal) = parse_device(device)? else {
        let config = BuildConfig {
            device: DeviceKind::Cpu,
            ..config.clone()
        };
        return torchtrt_core::build(network, &config, &[Arc::new(CpuBackend::new())]);
    };
    let cuda = cuda_backend(ordinal)?;
    let config = BuildConfig {
        device: DeviceKind::Cuda,
        ..config.clone()
    };
    let backends: Vec<Arc<dyn Backend>> = vec![cuda.clone(), Arc::new(CpuBackend::new())];
    let engine = torchtrt_core::build(network, &config, &backends)?;
    warm_up(&engine);
    Ok(engine)
}

/// Runs a CUDA engine once on zeros of its opt shapes, compiling the programs its layers
/// use; a failure (e.g. shapes that zeros do not satisfy) only leaves them to compile on
/// first use.
fn warm_up(engine: &Engine) {
    let inputs: Vec<Tensor> = engine
        .plan()
        .inputs
        .iter()
        .map(|i| {
            let shape: Vec<usize> = i.dims.iter().map(|d| d.range().1 as usize).collect();
            Tensor::zeros(i.dtype, &shape)
        })
        .collect();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    if let Ok(mut ctx) = engine.create_context() {
        let _ = ctx.execute(&refs);
    }
}

/// The backend that evaluates layers of known inputs while importing: the CPU.
pub fn evaluator() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::new())
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
        evaluator: options.evaluator.or_else(|| Some(evaluator())),
        ..options
    };
    onnx::import_file(path, registry(), &options)
}

/// Deserializes engines (TensorRT's `IRuntime`): re-creates their plugins from the
/// process-wide registry (the built-in plugins registered) and prepares their kernels on
/// the backend of their target — the CPU, or the CUDA device of their compute capability.
#[derive(Clone)]
pub struct Runtime {
    backends: Vec<Arc<dyn Backend>>,
}

impl Runtime {
    /// A runtime over the default backends; registers the built-in plugins.
    pub fn new() -> Result<Runtime> {
        init_plugins()?;
        Ok(Runtime {
            backends: default_backends(),
        })
    }

    /// A runtime over these backends (a CUDA device other than the default, say).
    pub fn with_backends(backends: Vec<Arc<dyn Backend>>) -> Result<Runtime> {
        init_plugins()?;
        Ok(Runtime { backends })
    }

    /// Loads a plugin library into the process-wide registry (its plugin creators only;
    /// [`load_extensions`] also adds converters and custom ops).
    pub fn load_plugins(&self, path: impl AsRef<Path>) -> Result<LibraryInfo> {
        registry().load_library(path)
    }

    /// Reads an engine from bytes.
    pub fn deserialize(&self, bytes: &[u8]) -> Result<Engine> {
        Engine::deserialize(bytes, registry(), &self.backends)
    }

    /// Reads an engine from a file.
    pub fn deserialize_file(&self, path: impl AsRef<Path>) -> Result<Engine> {
        let path = path.as_ref();
        let bytes = torchtrt_core::files::read_engine(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        self.deserialize(&bytes)
    }
}
