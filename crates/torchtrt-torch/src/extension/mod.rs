//! Converters from extension libraries for torch ops: a library converter for
//! `(namespace, name)` (the converter ABI's `(domain, op_type)`), and the converter derived
//! from a custom op of that namespace and name, kept in one process-wide table that
//! [`ConverterRegistry::with_extensions`] adds to the built-ins.

mod builder;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::abi::Extension;
use torchtrt_core::plugin_api::{self as api, ConverterNode, PluginKey, custom_op_key};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::Node;
use crate::registry::{Converter, ConverterRegistry};

/// A library converter as a registry converter: the node becomes a [`ConverterNode`]
/// (domain = namespace, op type = name, attributes = the non-tensor arguments by name,
/// inputs = the tensor arguments in order), the import context a [`api::NetworkBuilder`].
struct LibraryConverter {
    converter: Arc<dyn api::Converter>,
    provider: String,
}

impl Converter for LibraryConverter {
    fn convert(&self, ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
        let (inputs, attributes) = crate::fallback::split_arguments(ctx, node)?;
        let view = ConverterNode {
            name: node.name.clone(),
            op_type: node.op.name.clone(),
            domain: node.op.namespace.clone(),
            opset: 1,
            attributes,
            inputs: inputs.into_iter().map(|t| t.map(builder::handle)).collect(),
            num_outputs: node.raw.outputs.len(),
        };
        let mut net = builder::CtxBuilder { ctx, node };
        let outs = self
            .converter
            .convert(&view, &mut net)
            .map_err(|e| node.err(format!("custom converter of `{}`: {e}", self.provider)))?;
        outs.into_iter()
            .map(|h| {
                u32::try_from(h.0)
                    .map(TensorId)
                    .map_err(|_| node.err(format!("custom converter returned handle {}", h.0)))
            })
            .collect()
    }
}

/// The converter derived from a custom op: the node becomes the op's plugin layer, its
/// arguments the plugin's fields by name (as the plugin fallback does).
struct CustomOpConverter {
    key: PluginKey,
}

impl Converter for CustomOpConverter {
    fn convert(&self, ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
        crate::fallback::convert_with_key(ctx, node, &self.key)?.ok_or_else(|| {
            node.err(format!(
                "the plugin {} of this custom op is not in the registry",
                self.key
            ))
        })
    }
}

/// What provides an extension converter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtensionOpKind {
    /// A custom converter.
    Converter,
    /// A custom op (its derived converter).
    CustomOp,
}

/// One torch op a library added.
#[derive(Clone)]
pub struct ExtensionOp {
    /// The op's namespace (the library's domain).
    pub namespace: String,
    /// The op's name (the library's op type).
    pub name: String,
    /// Custom converter or custom op.
    pub kind: ExtensionOpKind,
    /// The library's identity.
    pub provider: String,
    /// The library's path.
    pub library: PathBuf,
    /// Whether it replaces a built-in converter (the user asked to override).
    pub overrides_builtin: bool,
    converter: Arc<dyn Converter>,
}

impl std::fmt::Debug for ExtensionOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionOp")
            .field("op", &format!("{}::{}", self.namespace, self.name))
            .field("kind", &self.kind)
            .field("provider", &self.provider)
            .field("library", &self.library)
            .field("overrides_builtin", &self.overrides_builtin)
            .finish()
    }
}

/// Why a library's torch converters were refused.
#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    /// An op the library claims is taken, by a built-in converter or another library.
    #[error("{0}")]
    Clash(String),
    /// Registering the rest of the library failed (nothing was added).
    #[error(transparent)]
    Rest(#[from] torchtrt_core::Error),
}

fn table() -> &'static Mutex<Vec<ExtensionOp>> {
    static TABLE: OnceLock<Mutex<Vec<ExtensionOp>>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The torch converters libraries have added to this process, in load order.
pub fn extension_ops() -> Vec<ExtensionOp> {
    table().lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The torch ops of `ext`: its converters and custom ops whose domain names a torch
/// namespace (ONNX's default domain `""` has none).
fn ops_of(
    ext: &Extension,
    library: &Path,
    builtin: &ConverterRegistry,
    allow_override: bool,
) -> Vec<ExtensionOp> {
    let entry = |namespace: String, name: String, kind, converter| ExtensionOp {
        overrides_builtin: allow_override && builtin.contains(&namespace, &name),
        namespace,
        name,
        kind,
        provider: ext.provider().to_string(),
        library: library.to_path_buf(),
        converter,
    };
    let mut out = Vec::new();
    for c in ext.converters() {
        let op = c.op();
        if op.domain.is_empty() || op.domain == "ai.onnx" {
            continue;
        }
        let conv: Arc<dyn Converter> = Arc::new(LibraryConverter {
            converter: c,
            provider: ext.provider().to_string(),
        });
        out.push(entry(
            op.domain,
            op.op_type,
            ExtensionOpKind::Converter,
            conv,
        ));
    }
    for op in ext.custom_ops() {
        if op.domain().is_empty() {
            continue;
        }
        let conv: Arc<dyn Converter> = Arc::new(CustomOpConverter {
            key: custom_op_key(op.as_ref()),
        });
        out.push(entry(
            op.domain(),
            op.op_type(),
            ExtensionOpKind::CustomOp,
            conv,
        ));
    }
    out
}

/// Adds the torch converters and custom ops of `ext` (loaded from `library`) to the
/// process-wide table, atomically with `register_rest` (the library's plugins and ONNX
/// converters): a clash refuses everything before `register_rest` runs, and a failure of
/// `register_rest` adds nothing here.
///
/// An op with a built-in converter is refused unless `allow_override`; an op another
/// library already claims is refused. Loading a library already in the table adds nothing.
pub fn register_extension_ops(
    ext: &Extension,
    library: &Path,
    allow_override: bool,
    register_rest: impl FnOnce() -> torchtrt_core::Result<()>,
) -> Result<Vec<ExtensionOp>, ExtensionError> {
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    if table.iter().any(|e| e.library == library) {
        register_rest()?;
        return Ok(Vec::new());
    }
    let builtin = ConverterRegistry::builtin();
    let ops = ops_of(ext, library, &builtin, allow_override);
    for op in &ops {
        let label = format!("{}::{}", op.namespace, op.name);
        if let Some(other) = table
            .iter()
            .find(|e| e.namespace == op.namespace && e.name == op.name)
        {
            return Err(ExtensionError::Clash(format!(
                "`{}` provides a converter for torch op {label}, which `{}` already provides (from {})",
                op.provider,
                other.provider,
                other.library.display()
            )));
        }
        if builtin.contains(&op.namespace, &op.name) && !allow_override {
            return Err(ExtensionError::Clash(format!(
                "`{}` provides a converter for torch op {label}, which has a built-in converter; \
                 ask to override built-in converters (torchtrtc --override-converters) to use the \
                 library's",
                op.provider
            )));
        }
    }
    register_rest()?;
    table.extend(ops.iter().cloned());
    Ok(ops)
}

impl ConverterRegistry {
    /// The built-in converters plus those extension libraries added to this process.
    pub fn with_extensions() -> ConverterRegistry {
        let mut r = ConverterRegistry::builtin();
        for e in extension_ops() {
            let source = format!("{} ({})", e.provider, e.library.display());
            r.register(&e.namespace, &e.name, None, e.converter, &source);
        }
        r
    }
}
