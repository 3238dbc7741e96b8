//! Import errors: each names the archive, the node, or the tensor involved.

/// Why a program could not be read or imported.
#[derive(Debug, thiserror::Error)]
pub enum TorchError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The archive is not a `torch.export` archive this reader understands.
    #[error("{path}: {reason}")]
    Archive {
        /// The archive (or `<memory>`).
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The program's schema version is not one this reader understands.
    #[error(
        "{path}: ExportedProgram schema version {found_major}.{found_minor} is not supported: \
         this reader reads schema {supported_major}.x (written up to {supported_major}.{supported_minor})"
    )]
    Version {
        /// The archive.
        path: String,
        /// The program's major version.
        found_major: i64,
        /// The program's minor version.
        found_minor: i64,
        /// The major version read.
        supported_major: i64,
        /// The newest minor version known.
        supported_minor: i64,
    },
    /// The program is structurally invalid or uses something unsupported outside any node.
    #[error("{0}")]
    Program(String),
    /// A node could not be converted.
    #[error("node `{node}` ({op}): {message}")]
    Node {
        /// The node's name.
        node: String,
        /// `namespace::op.overload`.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// Ops no converter, custom op or plugin knows, every one of the program at once.
    #[error("{}", unsupported_message(.0))]
    Unsupported(Vec<UnsupportedOp>),
    /// An error from the engine core (a layer rejected its inputs, …).
    #[error(transparent)]
    Core(#[from] torchtrt_core::Error),
}

/// One op of a program that nothing can convert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// `namespace::op.overload` (or the Python target, e.g. `math.floor`).
    pub op: String,
    /// The plugin key the fallback looked for, when the op has a namespace.
    pub plugin: Option<String>,
    /// The first node using it.
    pub first_node: String,
    /// How many nodes use it.
    pub count: usize,
}

fn unsupported_message(ops: &[UnsupportedOp]) -> String {
    let mut s = format!(
        "{} op{} of the program {} no converter, custom op or plugin:",
        ops.len(),
        if ops.len() == 1 { "" } else { "s" },
        if ops.len() == 1 { "has" } else { "have" },
    );
    for op in ops {
        let uses = if op.count == 1 {
            format!("node `{}`", op.first_node)
        } else {
            format!("{} nodes, first `{}`", op.count, op.first_node)
        };
        let plugin = op
            .plugin
            .as_ref()
            .map(|k| format!("; no plugin {k} in the registry"))
            .unwrap_or_default();
        s.push_str(&format!("\n  {} ({uses}{plugin})", op.op));
    }
    s.push_str(
        "\nprovide them with --custom-converters LIB (a converter for the op's namespace and \
         name), --custom-torch-ops LIB (a custom op: schema, shape rule, kernel) or --plugins LIB \
         (a plugin named after the op in its namespace)",
    );
    s
}

/// Shorthand for import results.
pub type Result<T, E = TorchError> = std::result::Result<T, E>;
