//! The converter registry: torch op → converter, keyed by namespace and name with an
//! optional overload (`aten::add` covers every overload, `aten::add.Tensor` one of them and
//! wins over the former). Built-in converters are registered from `ops/`; custom-converter
//! libraries add theirs to the same table.

use std::collections::BTreeMap;
use std::sync::Arc;

use torchtrt_core::TensorId;

use crate::ctx::Ctx;
use crate::error::Result;
use crate::node::{Node, OpName};

/// Converts one node into layers; returns its outputs in order (see [`Ctx::bind`]).
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
    /// The overload handled (`None`: every overload).
    pub overload: Option<String>,
    /// The converter.
    pub converter: Arc<dyn Converter>,
    /// Who registered it: the op family (`builtin: activation`) or a library.
    pub source: String,
}

/// Converters by `(namespace, name)`.
#[derive(Clone, Default)]
pub struct ConverterRegistry {
    entries: BTreeMap<(String, String), Vec<ConverterEntry>>,
    family: String,
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

    /// Registers `converter` for `namespace::name`, for one overload or all. Entries added
    /// later take precedence over earlier ones for what they cover.
    pub fn register(
        &mut self,
        namespace: &str,
        name: &str,
        overload: Option<&str>,
        converter: Arc<dyn Converter>,
        source: &str,
    ) {
        self.entries
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .push(ConverterEntry {
                overload: overload.map(str::to_string),
                converter,
                source: source.to_string(),
            });
    }

    /// Sets the family the following [`ConverterRegistry::add`] calls are listed under.
    pub(crate) fn family(&mut self, family: &str) {
        self.family = family.to_string();
    }

    /// Registers a built-in converter for each of `labels` (`aten::relu`, `aten::add.Tensor`).
    pub(crate) fn add(
        &mut self,
        labels: &[&str],
        f: fn(&mut Ctx<'_>, &Node<'_>) -> Result<Vec<TensorId>>,
    ) {
        let source = format!("builtin: {}", self.family);
        for label in labels {
            let op = OpName::from_label(label);
            let overload = (!op.overload.is_empty()).then_some(op.overload.as_str());
            self.register(&op.namespace, &op.name, overload, Arc::new(f), &source);
        }
    }

    /// Whether any converter exists for `namespace::name`.
    pub fn contains(&self, namespace: &str, name: &str) -> bool {
        self.entries
            .contains_key(&(namespace.to_string(), name.to_string()))
    }

    /// The converter for `op`: the latest for its overload, else the latest for every
    /// overload.
    pub fn lookup(&self, op: &OpName) -> Option<&ConverterEntry> {
        let list = self.entries.get(&(op.namespace.clone(), op.name.clone()))?;
        list.iter()
            .rev()
            .find(|e| e.overload.as_deref() == Some(op.overload.as_str()))
            .or_else(|| list.iter().rev().find(|e| e.overload.is_none()))
    }

    /// Every registered op as `(label, source)`, sorted by label.
    pub fn ops(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        for ((ns, name), list) in &self.entries {
            for e in list {
                let op = OpName {
                    namespace: ns.clone(),
                    name: name.clone(),
                    overload: e.overload.clone().unwrap_or_default(),
                };
                v.push((op.label(), e.source.clone()));
            }
        }
        v.sort();
        v.dedup();
        v
    }
}
