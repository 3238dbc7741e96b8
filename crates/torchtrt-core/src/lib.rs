//! torchtrt-core: the engine half of torchtrt — tensors, the network definition and its
//! layer kinds, the plugin registry, the builder that turns a network into an [`Engine`],
//! the engine file format, and the runtime that executes engines through a [`Backend`].

pub mod backend;
pub mod builder;
pub mod engine;
pub mod error;
pub mod files;
pub mod kernel_plugin;
pub mod layers;
mod library;
pub mod limits;
pub mod network;
pub mod registry;
pub mod runtime;
pub mod shape_arith;
pub mod tensor;

pub use backend::EngineBlob;
pub use backend::{
    Backend, CapturedRun, ChannelsLast, DeviceContext, DeviceMemory, Kernel, Placement,
    PrepareOptions,
};
pub use builder::{BuildConfig, Int8Calibration, TensorRange, TimingCache, build, passes};
pub use engine::{Engine, EnginePlan, EngineSummary, IoTensor, MemoryPlan, Target};
pub use error::{Error, Result};
pub use layers::{InferInput, LayerKind, LayerOp, TypeShape};
pub use network::{Dim, Layer, NetworkDefinition, NetworkInput, TensorId};
pub use registry::{
    CreatorInfo, LibraryInfo, OnDuplicate, PluginRegistry, RegisteredCreator, registry,
};
pub use runtime::{EngineLoader, ExecutionContext, IoBuffer, LayerTiming, MemoryKind};
pub use tensor::{AlignedBuf, Tensor};

pub use torchtrt_plugin_api as plugin_api;
