//! Reading model files.

use std::path::{Path, PathBuf};

use prost::Message;

use crate::error::{OnnxError, Result};
use crate::proto::ModelProto;

/// A decoded model and the folder its external data is read from.
pub struct LoadedModel {
    /// The model.
    pub proto: ModelProto,
    /// The model file's folder.
    pub base_dir: Option<PathBuf>,
}

/// Reads and decodes an `.onnx` file.
pub fn load_model(path: impl AsRef<Path>) -> Result<LoadedModel> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let proto = decode_model(&bytes, &path.display().to_string())?;
    Ok(LoadedModel {
        proto,
        base_dir: path.parent().map(Path::to_path_buf),
    })
}

/// Decodes model bytes; `label` names them in errors.
pub fn decode_model(bytes: &[u8], label: &str) -> Result<ModelProto> {
    let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode {
        path: label.to_string(),
        reason: e.to_string(),
    })?;
    if model.graph.is_none() {
        return Err(OnnxError::Decode {
            path: label.to_string(),
            reason: "no graph (is this an ONNX model?)".into(),
        });
    }
    Ok(model)
}
