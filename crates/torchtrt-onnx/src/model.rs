//! Reading model files.

use std::io::Read;
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

/// The largest `.onnx` file read: 2 GiB, protobuf's limit (larger weights go in external
/// data files).
pub const MAX_MODEL_BYTES: u64 = 2 << 30;

/// Reads and decodes an `.onnx` file of at most [`MAX_MODEL_BYTES`].
pub fn load_model(path: impl AsRef<Path>) -> Result<LoadedModel> {
    let path = path.as_ref();
    let bytes = read_protobuf(path, "an ONNX model").map_err(|source| OnnxError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let proto = decode_model(&bytes, &path.display().to_string())?;
    Ok(LoadedModel {
        proto,
        base_dir: path.parent().map(Path::to_path_buf),
    })
}

/// Reads a protobuf file of at most [`MAX_MODEL_BYTES`]: a file whose first byte cannot
/// begin a protobuf message (field number 0, wire type 6 or 7 — e.g. `/dev/zero`) is refused
/// before reading on, and a longer one after `MAX_MODEL_BYTES + 1` bytes. `what` names the
/// message kind in errors.
pub fn read_protobuf(path: &Path, what: &str) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    (&mut file).take(1).read_to_end(&mut bytes)?;
    if let Some(&b) = bytes.first()
        && (b >> 3 == 0 || b & 7 > 5)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not {what}: byte 0 is {b:#04x}, which cannot begin a protobuf field"),
        ));
    }
    file.take(MAX_MODEL_BYTES).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_MODEL_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than protobuf's 2 GiB limit for {what}"),
        ));
    }
    Ok(bytes)
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
