//! Converters from extension libraries: custom converters called through the plugin ABI,
//! and the converters derived from custom ops, kept in one process-wide table that
//! [`ConverterRegistry::with_extensions`] adds to the built-ins.

mod attributes;
mod builder;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::abi::Extension;
use torchtrt_core::plugin_api::{
    self as api, ConverterNode, PluginKey, TensorHandle, custom_op_key,
};

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::{Node, normalize_domain};
use crate::registry::{Converter, ConverterRegistry};

/// A library converter as a registry converter: the node becomes a [`ConverterNode`], the
/// import context a [`api::NetworkBuilder`], and errors name the node and the library.
struct LibraryConverter {
    converter: Arc<dyn api::Converter>,
    provider: String,
}

impl Converter for LibraryConverter {
    fn convert(&self, ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
        let inputs = (0..node.num_inputs())
            .map(|i| {
                Ok(ctx
                    .opt_input(node, i)?
                    .map(|t| TensorHandle(i64::from(t.0))))
            })
            .collect::<Result<Vec<_>>>()?;
        let view = ConverterNode {
            name: node.name.clone(),
            op_type: node.op_type().to_string(),
            domain: node.domain().to_string(),
            opset: ctx.opset(),
            attributes: attributes::node_fields(node)?,
            inputs,
            num_outputs: node.proto.output.len(),
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
/// attributes the plugin's fields (as the plugin fallback does).
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

/// One converter a library added.
#[derive(Clone)]
pub struct ExtensionOp {
    /// Domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Op type.
    pub op_type: String,
    /// First opset handled.
    pub since: i64,
    /// Last opset handled.
    pub until: Option<i64>,
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
            .field("op", &format!("{}::{}", self.domain, self.op_type))
            .field("kind", &self.kind)
            .field("provider", &self.provider)
            .field("library", &self.library)
            .field("overrides_builtin", &self.overrides_builtin)
            .finish()
    }
}

/// Why a library's converters were refused.
#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    /// An op the library claims is taken, by a built-in converter or another library.
    #[error("{0}")]
    Clash(String),
    /// Registering the library's plugins failed (nothing was added).
    #[error(transparent)]
    Plugins(#[from] torchtrt_core::Error),
}

fn table() -> &'static Mutex<Vec<ExtensionOp>> {
    static TABLE: OnceLock<Mutex<Vec<ExtensionOp>>> = OnceLock::new();
    TABLE.get_or_init(Mutex::default)
}

/// The converters libraries have added to this process, in load order.
pub fn extension_ops() -> Vec<ExtensionOp> {
    table().lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The ops of `ext` as table entries.
fn ops_of(
    ext: &Extension,
    library: &Path,
    builtin: &ConverterRegistry,
    allow_override: bool,
) -> Vec<ExtensionOp> {
    let entry = |domain: String, op_type: String, since, until, kind, converter| ExtensionOp {
        overrides_builtin: allow_override && builtin.contains(&domain, &op_type),
        domain: normalize_domain(&domain).to_string(),
        op_type,
        since,
        until,
        kind,
        provider: ext.provider().to_string(),
        library: library.to_path_buf(),
        converter,
    };
    let mut out = Vec::new();
    for c in ext.converters() {
        let op = c.op();
        let conv: Arc<dyn Converter> = Arc::new(LibraryConverter {
            converter: c,
            provider: ext.provider().to_string(),
        });
        out.push(entry(
            op.domain,
            op.op_type,
            op.since_opset,
            op.until_opset,
            ExtensionOpKind::Converter,
            conv,
        ));
    }
    for op in ext.custom_ops() {
        let key = custom_op_key(op.as_ref());
        let conv: Arc<dyn Converter> = Arc::new(CustomOpConverter { key });
        out.push(entry(
            op.domain(),
            op.op_type(),
            1,
            None,
            ExtensionOpKind::CustomOp,
            conv,
        ));
    }
    out
}

/// Adds the converters and custom ops of `ext` (loaded from `library`) to the process-wide
/// table, atomically with `register_plugins`: a clash refuses everything before the plugins
/// are touched, and a failure of `register_plugins` adds no converter.
///
/// An op with a built-in converter is refused unless `allow_override`, in which case the
/// library's wins. An op another library already claims is refused. Loading a library whose
/// ops are already in the table (the same path) adds nothing.
pub fn register_extension_ops(
    ext: &Extension,
    library: &Path,
    allow_override: bool,
    register_plugins: impl FnOnce() -> torchtrt_core::Result<()>,
) -> Result<Vec<ExtensionOp>, ExtensionError> {
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    if table.iter().any(|e| e.library == library) {
        register_plugins()?;
        return Ok(Vec::new());
    }
    let builtin = ConverterRegistry::builtin();
    let ops = ops_of(ext, library, &builtin, allow_override);
    for op in &ops {
        let label = match op.domain.as_str() {
            "" => op.op_type.clone(),
            d => format!("{d}::{}", op.op_type),
        };
        if let Some(other) = table
            .iter()
            .find(|e| e.domain == op.domain && e.op_type == op.op_type)
        {
            return Err(ExtensionError::Clash(format!(
                "`{}` provides a converter for {label}, which `{}` already provides (from {})",
                op.provider,
                other.provider,
                other.library.display()
            )));
        }
        if builtin.contains(&op.domain, &op.op_type) && !allow_override {
            return Err(ExtensionError::Clash(format!(
                "`{}` provides a converter for {label}, which has a built-in converter; ask to \
                 override built-in converters (torchtrtc --override-converters) to use the \
                 library's",
                op.provider
            )));
        }
    }
    register_plugins()?;
    for op in &ops {
        tracing::debug!(op = %op.op_type, domain = %op.domain, provider = %op.provider, "added extension converter");
    }
    table.extend(ops.iter().cloned());
    Ok(ops)
}

impl ConverterRegistry {
    /// The built-in converters plus those extension libraries added to this process (which
    /// take precedence where the user allowed them to override a built-in).
    pub fn with_extensions() -> ConverterRegistry {
        let mut r = ConverterRegistry::builtin();
        for e in extension_ops() {
            let source = format!("{} ({})", e.provider, e.library.display());
            r.register(
                &e.domain,
                &e.op_type,
                e.since,
                e.until,
                e.converter,
                &source,
            );
        }
        r
    }
}
