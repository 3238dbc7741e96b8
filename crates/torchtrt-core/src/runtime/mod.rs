//! The runtime: deserializes engines and executes them through one [`ExecutionContext`],
//! whatever their backend.

mod context;
mod dims;
mod graph;
mod io;
mod plans;
mod shapes;
mod value;
mod walk;

pub use context::{ExecutionContext, GRAPHS_ENV, LayerTiming};
pub use dims::concrete_dims;
pub(crate) use dims::{concrete, infer_concrete};
pub use io::{IoBuffer, MemoryKind};
pub(crate) use walk::data_dependent;

use std::path::Path;
use std::sync::Arc;

use crate::backend::Backend;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::registry::{PluginRegistry, registry};

/// Deserializes engines for a set of backends, re-creating plugins from a registry. The
/// `torchtrt` facade's `Runtime` (TensorRT's `IRuntime`) is this over the default backends.
#[derive(Clone)]
pub struct EngineLoader {
    backends: Vec<Arc<dyn Backend>>,
    registry: &'static PluginRegistry,
}

impl EngineLoader {
    /// A loader over `backends`, using the process-wide plugin registry.
    pub fn new(backends: Vec<Arc<dyn Backend>>) -> EngineLoader {
        EngineLoader {
            backends,
            registry: registry(),
        }
    }

    /// A loader using another registry (tests, isolated hosts).
    pub fn with_registry(
        backends: Vec<Arc<dyn Backend>>,
        registry: &'static PluginRegistry,
    ) -> EngineLoader {
        EngineLoader { backends, registry }
    }

    /// The backends.
    pub fn backends(&self) -> &[Arc<dyn Backend>] {
        &self.backends
    }

    /// The registry plugins are re-created from.
    pub fn registry(&self) -> &'static PluginRegistry {
        self.registry
    }

    /// Reads an engine from bytes.
    pub fn deserialize(&self, bytes: &[u8]) -> Result<Engine> {
        Engine::deserialize(bytes, self.registry, &self.backends)
    }

    /// Reads an engine from a file.
    pub fn deserialize_file(&self, path: impl AsRef<Path>) -> Result<Engine> {
        let path = path.as_ref();
        let bytes = crate::files::read_engine(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        self.deserialize(&bytes)
    }
}
