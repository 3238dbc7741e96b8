//! The converter registry: `(domain, op_type)` → converters with the opset ranges they
//! handle. Built-in converters are registered from `ops/`; custom-converter libraries add
//! theirs to the same table.

use std::collections::HashMap;
use std::sync::Arc;

use torchtrt_core::TensorId;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::{Node, normalize_domain};

/// Converts one ONNX node into layers; returns one tensor per node output, in order.
pub trait Converter: Send + Sync {
    /// Adds the node's layers to `ctx.net`.
    fn convert(&self, ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>>;
}

impl<F> Converter for F
where
    F: Fn(&mut Ctx<'_>, &Node<'_>) -> Result<Vec<TensorId>> + Send + Sync,
{
    fn convert(&self, ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Vec<TensorId>> {
        self(ctx, node)
    }
}

/// One registered converter.
#[derive(Clone)]
pub struct ConverterEntry {
    /// First opset handled.
    pub since: i64,
    /// Last opset handled (`None`: all later ones).
    pub until: Option<i64>,
    /// The converter.
    pub converter: Arc<dyn Converter>,
    /// Who registered it (`builtin` or a library).
    pub source: String,
}

/// Converters by `(domain, op_type)`.
#[derive(Clone, Default)]
pub struct ConverterRegistry {
    entries: HashMap<(String, String), Vec<ConverterEntry>>,
}

impl ConverterRegistry {
    /// An empty registry.
    pub fn new() -> ConverterRegistry {
        ConverterRegistry::default()
    }

    /// The built-in converters.
    pub fn builtin() -> ConverterRegistry {
        let mut r = ConverterRegistry::new();
        crate::ops::register(&mut r);
        r
    }

    /// Registers `converter` for `op_type` in `domain` for opsets `since..=until`. Entries
    /// added later take precedence over earlier ones for the opsets they cover.
    pub fn register(
        &mut self,
        domain: &str,
        op_type: &str,
        since: i64,
        until: Option<i64>,
        converter: Arc<dyn Converter>,
        source: &str,
    ) {
        self.entries
            .entry((normalize_domain(domain).to_string(), op_type.to_string()))
            .or_default()
            .push(ConverterEntry {
                since,
                until,
                converter,
                source: source.to_string(),
            });
    }

    /// Registers a built-in converter function for every opset.
    pub fn add(&mut self, op_type: &str, f: fn(&mut Ctx<'_>, &Node<'_>) -> Result<Vec<TensorId>>) {
        self.register("", op_type, 1, None, Arc::new(f), "builtin");
    }

    /// Whether any converter exists for `(domain, op_type)`.
    pub fn contains(&self, domain: &str, op_type: &str) -> bool {
        self.entries
            .contains_key(&(normalize_domain(domain).to_string(), op_type.to_string()))
    }

    /// The converter for `(domain, op_type)` at `opset`.
    pub fn lookup(&self, domain: &str, op_type: &str, opset: i64) -> Option<&ConverterEntry> {
        self.entries
            .get(&(normalize_domain(domain).to_string(), op_type.to_string()))?
            .iter()
            .rev()
            .find(|e| e.since <= opset && e.until.is_none_or(|u| opset <= u))
    }

    /// Every registered `(domain, op_type)`, sorted.
    pub fn ops(&self) -> Vec<(String, String)> {
        let mut v: Vec<_> = self.entries.keys().cloned().collect();
        v.sort();
        v
    }
}
