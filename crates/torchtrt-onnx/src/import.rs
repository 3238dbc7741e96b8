//! The importer: ONNX graph → `NetworkDefinition`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use torchtrt_core::layers::TypeShape;
use torchtrt_core::network::Dim;
use torchtrt_core::{Backend, NetworkDefinition, PluginRegistry, TensorId};

use crate::ctx::Ctx;
use crate::error::{OnnxError, Result};
use crate::node::{Node, normalize_domain};
use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{ModelProto, ValueInfoProto};
use crate::registry::ConverterRegistry;
use crate::tensor::{dtype_from_onnx, tensor_from_proto};

/// How to import a model.
#[derive(Clone)]
pub struct ImportOptions {
    /// Dims to use for inputs, by input name, replacing the model's (`--input NAME=…`).
    pub input_dims: HashMap<String, Vec<Dim>>,
    /// `(min, opt, max)` for dims the model leaves dynamic and `input_dims` does not fix.
    pub default_range: (i64, i64, i64),
    /// Computes layers whose inputs are all known while importing, so converters that need
    /// values (resize scales computed from shapes, …) see them. Usually the CPU backend.
    pub evaluator: Option<Arc<dyn Backend>>,
    /// The converters to use; by default the built-ins plus those loaded extension
    /// libraries added.
    pub converters: Arc<ConverterRegistry>,
    /// Replace exported GELU and `F.normalize` patterns by plugins (see `patterns`).
    pub fuse_patterns: bool,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            input_dims: HashMap::new(),
            default_range: (1, 1, 1 << 16),
            evaluator: None,
            converters: Arc::new(ConverterRegistry::with_extensions()),
            fuse_patterns: true,
        }
    }
}

/// Imports `model` (whose external data, if any, lies in `base_dir`).
pub fn import_model(
    model: &ModelProto,
    base_dir: Option<&Path>,
    registry: &PluginRegistry,
    options: &ImportOptions,
) -> Result<NetworkDefinition> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Model("the model has no graph".into()))?;
    let mut opsets = HashMap::new();
    for o in &model.opset_import {
        opsets.insert(normalize_domain(o.domain()).to_string(), o.version());
    }
    opsets.entry(String::new()).or_insert(1);
    let mut ctx = Ctx {
        net: NetworkDefinition::new(),
        registry,
        types: HashMap::new(),
        values: HashMap::new(),
        names: HashMap::new(),
        opsets,
        evaluator: options.evaluator.clone(),
        domain: String::new(),
    };
    for init in &graph.initializer {
        let value = tensor_from_proto(init, base_dir).map_err(OnnxError::Model)?;
        let t = ctx.add_named_constant(init.name(), value)?;
        ctx.names.insert(init.name().to_string(), t);
    }
    for input in &graph.input {
        if ctx.names.contains_key(input.name()) {
            continue;
        }
        let (dtype, dims) = input_signature(input, options)?;
        let t = ctx.net.add_input(input.name(), dtype, &dims)?;
        let shape = dims.iter().map(Dim::expr).collect();
        ctx.types.insert(t, TypeShape::new(dtype, shape));
        ctx.names.insert(input.name().to_string(), t);
    }
    let nodes = if options.fuse_patterns {
        crate::patterns::rewrite(graph)
    } else {
        graph.node.clone()
    };
    for (index, proto) in nodes.iter().enumerate() {
        let node = Node::new(proto, index);
        convert_node(&mut ctx, &node, &options.converters)?;
    }
    for output in &graph.output {
        let t = ctx.tensor(output.name()).ok_or_else(|| {
            OnnxError::Model(format!(
                "graph output `{}` is never computed",
                output.name()
            ))
        })?;
        ctx.net.mark_output(t, output.name())?;
    }
    Ok(ctx.net)
}

fn convert_node(ctx: &mut Ctx<'_>, node: &Node<'_>, converters: &ConverterRegistry) -> Result<()> {
    ctx.domain = node.domain().to_string();
    let opset = ctx.opset();
    let outputs: Vec<TensorId> = match converters.lookup(node.domain(), node.op_type(), opset) {
        Some(entry) => entry.converter.clone().convert(ctx, node)?,
        None => match crate::fallback::convert(ctx, node)? {
            Some(outs) => outs,
            None => {
                return Err(OnnxError::Unsupported {
                    node: node.name.clone(),
                    op: node.op_label(),
                    domain: node.domain().to_string(),
                    op_type: node.op_type().to_string(),
                    opset,
                    key: crate::fallback::plugin_key(node)?.to_string(),
                });
            }
        },
    };
    for (i, name) in node.proto.output.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        let t = outputs.get(i).copied().ok_or_else(|| {
            node.err(format!(
                "output {i} (`{name}`) is not produced ({} outputs converted)",
                outputs.len()
            ))
        })?;
        ctx.names.insert(name.clone(), t);
    }
    Ok(())
}

fn input_signature(
    input: &ValueInfoProto,
    options: &ImportOptions,
) -> Result<(torchtrt_core::plugin_api::DType, Vec<Dim>)> {
    let name = input.name();
    let bad = |m: String| OnnxError::Model(format!("graph input `{name}`: {m}"));
    let Some(TypeValue::TensorType(tt)) = input.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Err(bad("only tensor inputs are supported".into()));
    };
    let dtype = dtype_from_onnx(tt.elem_type()).map_err(bad)?;
    if let Some(dims) = options.input_dims.get(name) {
        return Ok((dtype, dims.clone()));
    }
    let shape = tt
        .shape
        .as_ref()
        .ok_or_else(|| bad("the input has no shape; give one with --input".into()))?;
    let (min, opt, max) = options.default_range;
    let dims = shape
        .dim
        .iter()
        .enumerate()
        .map(|(i, d)| match &d.value {
            Some(DimValue::DimValue(v)) if *v >= 0 => Dim::Fixed(*v),
            Some(DimValue::DimParam(p)) if !p.is_empty() => Dim::dynamic(p, min, opt, max),
            _ => Dim::dynamic(&format!("{name}.{i}"), min, opt, max),
        })
        .collect();
    Ok((dtype, dims))
}
