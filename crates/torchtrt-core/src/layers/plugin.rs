//! A layer computed by a plugin from the registry.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use torchtrt_plugin_api::{
    DType, FieldCollection, Plugin, PluginKey, ShapeExpr, ShapeValues, SizedOutput, Tactic,
};

use super::{InferInput, LayerOp, TypeShape};
use crate::kernel_plugin::KernelPackage;
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
    /// The implementation the builder timed fastest ([`Plugin::tactics`]), set on the
    /// plugin whenever the engine is loaded; `None`: the plugin's default.
    pub tactic: Option<Tactic>,
    /// The live plugin; absent only between decoding an engine and re-creating plugins.
    /// Set it with [`PluginLayer::set_plugin`].
    #[serde(skip)]
    pub plugin: Option<Arc<dyn Plugin>>,
    /// The plugin's shape inputs ([`Plugin::shape_inputs`]), read when it is set.
    #[serde(skip)]
    shape_inputs: Vec<usize>,
    /// The plugin's outputs sized by a count ([`Plugin::sized_outputs`]), read when it is
    /// set.
    #[serde(skip)]
    sized_outputs: Vec<SizedOutput>,
    /// For a kernel plugin, the package the engine stores with it (as an engine blob).
    #[serde(skip)]
    pub package: Option<Arc<KernelPackage>>,
}

impl PluginLayer {
    /// Wraps a created plugin; `provider` and `library` say where its creator came from.
    pub fn new(
        key: PluginKey,
        plugin: Box<dyn Plugin>,
        provider: Option<String>,
        library: Option<String>,
    ) -> PluginLayer {
        let mut layer = PluginLayer {
            fields: plugin.fields_to_serialize(),
            key,
            provider,
            library,
            tactic: None,
            plugin: None,
            shape_inputs: Vec::new(),
            sized_outputs: Vec::new(),
            package: None,
        };
        layer.set_plugin(Arc::from(plugin));
        layer
    }

    /// A layer whose plugin is not created yet (as an engine decodes it); see
    /// [`PluginLayer::set_plugin`].
    pub fn unresolved(
        key: PluginKey,
        fields: FieldCollection,
        provider: Option<String>,
        library: Option<String>,
    ) -> PluginLayer {
        PluginLayer {
            key,
            fields,
            provider,
            library,
            tactic: None,
            plugin: None,
            shape_inputs: Vec::new(),
            sized_outputs: Vec::new(),
            package: None,
        }
    }

    /// Installs the live plugin (created, re-created or configured) and reads its shape
    /// inputs and sized outputs.
    pub fn set_plugin(&mut self, plugin: Arc<dyn Plugin>) {
        self.shape_inputs = guard_plugin(|| Ok(plugin.shape_inputs())).unwrap_or_default();
        self.sized_outputs = guard_plugin(|| Ok(plugin.sized_outputs())).unwrap_or_default();
        self.plugin = Some(plugin);
    }

    /// The live plugin, or an error saying it has not been re-created.
    pub fn plugin(&self) -> Result<&Arc<dyn Plugin>, String> {
        self.plugin
            .as_ref()
            .ok_or_else(|| format!("plugin {} has not been created", self.key))
    }
}

impl PluginLayer {
    /// What is known of each input's values, for the plugin's shape inputs.
    fn shape_values(
        &self,
        inputs: &[InferInput<'_>],
    ) -> torchtrt_plugin_api::PluginResult<Vec<ShapeValues>> {
        let mut values = vec![ShapeValues::Unknown; inputs.len()];
        for &i in &self.shape_inputs {
            let Some(input) = inputs.get(i) else {
                return Err(torchtrt_plugin_api::PluginError::InvalidInput(format!(
                    "shape input {i} of a layer with {} inputs",
                    inputs.len()
                )));
            };
            if let Some(t) = input.value {
                values[i] = ShapeValues::from_bytes(t.dtype(), t.bytes())?;
            }
        }
        Ok(values)
    }
}

impl fmt::Debug for PluginLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginLayer")
            .field("key", &self.key.to_string())
            .field("fields", &self.fields)
            .field("provider", &self.provider)
            .field("library", &self.library)
            .field("tactic", &self.tactic)
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
    fn value_inputs(&self) -> &[usize] {
        &self.shape_inputs
    }
    fn sized_outputs(&self) -> &[SizedOutput] {
        &self.sized_outputs
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let p = self.plugin()?;
        let dtypes: Vec<DType> = inputs.iter().map(|i| i.dtype).collect();
        let shapes: Vec<ShapeExpr> = inputs.iter().map(|i| i.shape.to_vec()).collect();
        let (out_dtypes, out_shapes) = guard_plugin(|| {
            let dtypes = p.output_dtypes(&dtypes)?;
            let shapes = if self.shape_inputs.is_empty() {
                p.output_shapes(&shapes)?
            } else {
                p.output_shapes_of(&shapes, &self.shape_values(inputs)?)?
            };
            Ok((dtypes, shapes))
        })
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
        let ranks: Vec<usize> = out_shapes.iter().map(Vec::len).collect();
        SizedOutput::check(&self.sized_outputs, &ranks, &out_dtypes)
            .map_err(|e| format!("plugin {}: {e}", self.key))?;
        for (j, (dtype, shape)) in out_dtypes.iter().zip(&out_shapes).enumerate() {
            let Some(i) = guard_plugin(|| Ok(p.aliased_input(j))).unwrap_or(None) else {
                continue;
            };
            let input = inputs.get(i).ok_or_else(|| {
                format!(
                    "plugin {}: output {j} aliases input {i} of {}",
                    self.key,
                    inputs.len()
                )
            })?;
            if input.dtype != *dtype || input.shape != shape.as_slice() {
                return Err(format!(
                    "plugin {}: output {j} aliases input {i} but is {dtype}{} where the input is \
                     {}{}",
                    self.key,
                    torchtrt_plugin_api::format_shape(shape),
                    input.dtype,
                    torchtrt_plugin_api::format_shape(input.shape)
                ));
            }
        }
        Ok(out_dtypes
            .into_iter()
            .zip(out_shapes)
            .map(|(d, s)| TypeShape::new(d, s))
            .collect())
    }
}
