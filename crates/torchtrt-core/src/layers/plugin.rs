//! A layer computed by a plugin from the registry.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use torchtrt_plugin_api::{DType, FieldCollection, Plugin, PluginKey, ShapeExpr};

use super::{InferInput, LayerOp, TypeShape};
use crate::registry::guard_plugin;

/// A plugin layer: the key it was created under, the fields that re-create it, and the
/// provider (library) it came from. The plugin object itself is re-created through the
/// registry when an engine is loaded.
#[derive(Clone, Serialize, Deserialize)]
pub struct PluginLayer {
    /// Registry key.
    pub key: PluginKey,
    /// Fields the plugin serialized itself as.
    pub fields: FieldCollection,
    /// The provider that registered the creator (`torchtrt_plugins 0.1.0`, …).
    pub provider: Option<String>,
    /// The shared library the creator was loaded from at build time, if any.
    pub library: Option<String>,
    /// The live plugin; absent only between decoding an engine and re-creating plugins.
    #[serde(skip)]
    pub plugin: Option<Arc<dyn Plugin>>,
}

impl PluginLayer {
    /// Wraps a created plugin; `provider` and `library` say where its creator came from.
    pub fn new(
        key: PluginKey,
        plugin: Box<dyn Plugin>,
        provider: Option<String>,
        library: Option<String>,
    ) -> PluginLayer {
        PluginLayer {
            fields: plugin.fields_to_serialize(),
            key,
            provider,
            library,
            plugin: Some(Arc::from(plugin)),
        }
    }

    /// The live plugin, or an error saying it has not been re-created.
    pub fn plugin(&self) -> Result<&Arc<dyn Plugin>, String> {
        self.plugin
            .as_ref()
            .ok_or_else(|| format!("plugin {} has not been created", self.key))
    }
}

impl fmt::Debug for PluginLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginLayer")
            .field("key", &self.key.to_string())
            .field("fields", &self.fields)
            .field("provider", &self.provider)
            .field("library", &self.library)
            .finish()
    }
}

impl LayerOp for PluginLayer {
    fn kind(&self) -> &'static str {
        "Plugin"
    }
    fn arity(&self) -> (usize, usize) {
        (0, usize::MAX)
    }
    fn foldable(&self) -> bool {
        false
    }
    fn num_outputs(&self) -> usize {
        self.plugin.as_ref().map_or(1, |p| p.num_outputs())
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let p = self.plugin()?;
        let dtypes: Vec<DType> = inputs.iter().map(|i| i.dtype).collect();
        let shapes: Vec<ShapeExpr> = inputs.iter().map(|i| i.shape.to_vec()).collect();
        let (out_dtypes, out_shapes) =
            guard_plugin(|| Ok((p.output_dtypes(&dtypes)?, p.output_shapes(&shapes)?)))
                .map_err(|e| format!("plugin {}: {e}", self.key))?;
        if out_dtypes.len() != p.num_outputs() || out_shapes.len() != p.num_outputs() {
            return Err(format!(
                "plugin {} declares {} outputs but gave {} dtypes and {} shapes",
                self.key,
                p.num_outputs(),
                out_dtypes.len(),
                out_shapes.len()
            ));
        }
        Ok(out_dtypes
            .into_iter()
            .zip(out_shapes)
            .map(|(d, s)| TypeShape::new(d, s))
            .collect())
    }
}
