//! Import errors: each names the file, the node, or the tensor involved.

/// Why a model could not be read or imported.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not an ONNX model.
    #[error("{path}: not an ONNX model: {reason}")]
    Decode {
        /// The file (or `<memory>`).
        path: String,
        /// The protobuf decoder's message.
        reason: String,
    },
    /// The model is structurally invalid or uses something unsupported outside any node.
    #[error("{0}")]
    Model(String),
    /// A node could not be converted.
    #[error("node `{node}` ({op}): {message}")]
    Node {
        /// Node name (or `#index` when unnamed).
        node: String,
        /// `domain::op_type`, or `op_type` for the default domain.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// No converter and no plugin knows the node's op.
    #[error(
        "node `{node}`: no converter for {op} (opset {opset}) and no plugin {key} in the registry; \
         searched converters for ({domain:?}, {op_type:?}) and plugins by name `{op_type}`"
    )]
    Unsupported {
        /// Node name.
        node: String,
        /// `domain::op_type`.
        op: String,
        /// The node's domain.
        domain: String,
        /// The node's op type.
        op_type: String,
        /// The opset of the domain.
        opset: i64,
        /// The plugin key tried.
        key: String,
    },
    /// An error from the engine core (a layer rejected its inputs, …).
    #[error(transparent)]
    Core(#[from] torchtrt_core::Error),
}

/// Shorthand for import results.
pub type Result<T, E = OnnxError> = std::result::Result<T, E>;
