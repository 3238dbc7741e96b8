//! ONNX import for torchtrt. A model is decoded with `prost` from the vendored
//! `onnx.proto`, and each node converted into layers by the converter registered for its
//! `(domain, op_type)` and opset; nodes no converter knows fall back to the plugin registry,
//! as onnx-tensorrt's fallback importer does.

mod ctx;
mod error;
mod extension;
mod fallback;
mod import;
mod model;
mod node;
mod ops;
mod patterns;
pub mod proto;
mod registry;
mod tensor;

pub use ctx::Ctx;
pub use error::{OnnxError, Result};
pub use extension::{
    ExtensionError, ExtensionOp, ExtensionOpKind, extension_ops, register_extension_ops,
};
pub use fallback::plugin_key;
pub use import::{ImportOptions, import_model};
pub use model::{LoadedModel, MAX_MODEL_BYTES, decode_model, load_model, read_protobuf};
pub use node::{Node, normalize_domain};
pub use registry::{Converter, ConverterEntry, ConverterRegistry};
pub use tensor::{dtype_from_onnx, dtype_to_onnx, tensor_from_proto};

/// Reads an `.onnx` file and imports it.
pub fn import_file(
    path: impl AsRef<std::path::Path>,
    registry: &torchtrt_core::PluginRegistry,
    options: &ImportOptions,
) -> Result<torchtrt_core::NetworkDefinition> {
    let model = load_model(path)?;
    import_model(&model.proto, model.base_dir.as_deref(), registry, options)
}
