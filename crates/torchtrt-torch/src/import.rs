//! The importer: ExportedProgram → `NetworkDefinition`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use torchtrt_core::layers::{Cast, TypeShape};
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DimExpr;
use torchtrt_core::{Backend, NetworkDefinition, PluginRegistry, TensorId};

use crate::ctx::Ctx;
use crate::dtype::dtype_from_torch;
use crate::error::{Result, TorchError, UnsupportedOp};
use crate::node::Node;
use crate::program::Program;
use crate::registry::ConverterRegistry;
use crate::schema::{self, Argument, SymIntArg};
use crate::sym::parse_expr;

/// How to import a program.
#[derive(Clone)]
pub struct ImportOptions {
    /// Dims to use for user inputs, by name, replacing the program's (`--input NAME=…`).
    pub input_dims: HashMap<String, Vec<Dim>>,
    /// The largest value of a symbol whose range has no upper bound.
    pub default_max: i64,
    /// Computes layers whose inputs are all known while importing, so converters that need
    /// values see them. Usually the CPU backend.
    pub evaluator: Option<Arc<dyn Backend>>,
    /// The converters to use; by default the built-ins plus those loaded extension
    /// libraries added.
    pub converters: Arc<ConverterRegistry>,
    /// Replace `F.normalize`'s op sequence by the `NormalizePlugin` (see `patterns`).
    pub fuse_patterns: bool,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            input_dims: HashMap::new(),
            default_max: 1 << 16,
            evaluator: None,
            converters: Arc::new(ConverterRegistry::with_extensions()),
            fuse_patterns: true,
        }
    }
}

/// The ops of `nodes` that no converter, and no plugin in `registry`, knows: each once,
/// with how many nodes use it and the first.
pub fn unsupported_ops(
    nodes: &[schema::Node],
    converters: &ConverterRegistry,
    registry: &PluginRegistry,
) -> Vec<UnsupportedOp> {
    let mut found: BTreeMap<String, UnsupportedOp> = BTreeMap::new();
    for (i, raw) in nodes.iter().enumerate() {
        let node = Node::new(raw, i);
        if converters.lookup(&node.op).is_some() {
            continue;
        }
        let key = (!node.op.namespace.is_empty()).then(|| crate::fallback::plugin_key(&node.op));
        if key.as_ref().is_some_and(|k| registry.get(k).is_some()) {
            continue;
        }
        found
            .entry(node.op.label())
            .and_modify(|u| u.count += 1)
            .or_insert(UnsupportedOp {
                op: node.op.label(),
                plugin: key.map(|k| k.to_string()),
                first_node: node.name.clone(),
                count: 1,
            });
    }
    found.into_values().collect()
}

/// Imports `program`: parameters, buffers and constants become constants, user inputs
/// engine inputs (dims from the program's range constraints unless `options.input_dims`
/// gives them), each node the layers of its converter (or a plugin through the
/// fallback), and user outputs engine outputs named by [`Program::output_names`].
pub fn import_program(
    program: &Program,
    registry: &PluginRegistry,
    options: &ImportOptions,
) -> Result<NetworkDefinition> {
    let graph = program.graph();
    let nodes = if options.fuse_patterns {
        crate::patterns::rewrite(&graph.nodes)
    } else {
        graph.nodes.clone()
    };
    let unsupported = unsupported_ops(&nodes, &options.converters, registry);
    if !unsupported.is_empty() {
        return Err(TorchError::Unsupported(unsupported));
    }
    let mut ctx = Ctx::new(program, registry, options.evaluator.clone());
    let mut placeholders: Vec<(&String, &(String, torchtrt_core::Tensor))> =
        program.tensors.iter().collect();
    placeholders.sort_by(|a, b| a.0.cmp(b.0));
    for (placeholder, (fqn, value)) in placeholders {
        let t = ctx.add_named_constant(fqn, value.clone())?;
        ctx.names.insert(placeholder.clone(), t);
    }
    for input in program.user_inputs()? {
        let dims = match options.input_dims.get(&input.name) {
            Some(d) => d.clone(),
            None => program.input_dims(&input, options.default_max)?,
        };
        if dims.len() != input.sizes.len() {
            return Err(TorchError::Program(format!(
                "input `{}` has rank {}, the given shape has {} dims",
                input.name,
                input.sizes.len(),
                dims.len()
            )));
        }
        let t = ctx.net.add_input(&input.name, input.dtype, &dims)?;
        let shape = dims.iter().map(Dim::expr).collect();
        ctx.types.insert(t, TypeShape::new(input.dtype, shape));
        ctx.names.insert(input.name.clone(), t);
    }
    for (index, raw) in nodes.iter().enumerate() {
        let node = Node::new(raw, index);
        convert_node(&mut ctx, &node, &options.converters)?;
    }
    let names = program.output_names()?;
    for (arg, name) in program.user_output_args().into_iter().zip(&names) {
        let value = match arg {
            Argument::Tensor(n) | Argument::SymInt(SymIntArg::Name(n)) => n,
            other => {
                return Err(TorchError::Program(format!(
                    "output `{name}` is a constant ({}), not a tensor",
                    other.kind()
                )));
            }
        };
        let t = ctx.value_named(value).ok_or_else(|| {
            TorchError::Program(format!(
                "output `{name}` (value `{value}`) is never computed"
            ))
        })?;
        ctx.net.mark_output(t, name)?;
    }
    Ok(ctx.net)
}

fn convert_node(ctx: &mut Ctx<'_>, node: &Node<'_>, converters: &ConverterRegistry) -> Result<()> {
    let outputs: Vec<TensorId> = match converters.lookup(&node.op) {
        Some(entry) => entry.converter.clone().convert(ctx, node)?,
        None => crate::fallback::convert(ctx, node)?
            .ok_or_else(|| TorchError::Unsupported(vec![unsupported(node)]))?,
    };
    let outputs = conform(ctx, node, outputs)?;
    ctx.bind(node, &outputs);
    Ok(())
}

fn unsupported(node: &Node<'_>) -> UnsupportedOp {
    UnsupportedOp {
        op: node.op.label(),
        plugin: Some(crate::fallback::plugin_key(&node.op).to_string()),
        first_node: node.name.clone(),
        count: 1,
    }
}

/// Checks each tensor output against the program's metadata: the rank must match, and a
/// dtype that differs (torch's type promotion) is cast to the program's.
fn conform(ctx: &mut Ctx<'_>, node: &Node<'_>, mut outs: Vec<TensorId>) -> Result<Vec<TensorId>> {
    let names: Vec<Option<String>> = node
        .raw
        .outputs
        .iter()
        .flat_map(|a| match a {
            Argument::Tensors(ns) => ns.iter().map(|n| Some(n.clone())).collect(),
            Argument::Tensor(n) => vec![Some(n.clone())],
            _ => vec![None],
        })
        .collect();
    for (t, name) in outs.iter_mut().zip(names) {
        let Some(meta) = name.as_deref().and_then(|n| ctx.meta(n)) else {
            continue;
        };
        let rank = ctx.rank(*t);
        if rank != meta.sizes.len() {
            return Err(node.err(format!(
                "the converter produced `{}` with rank {rank}, the program says {}",
                name.unwrap_or_default(),
                meta.sizes.len()
            )));
        }
        refine_shape(ctx, *t, &meta.sizes);
        if let Ok(want) = dtype_from_torch(meta.dtype)
            && ctx.dtype(*t) != want
        {
            *t = ctx.add(node, Cast { to: want }, &[*t])?;
        }
    }
    Ok(outs)
}

/// Fills in the dims shape inference could not know (they depend on values computed at
/// run time) from the program's sizes: literals, and expressions over the symbols the
/// engine's inputs are named by.
fn refine_shape(ctx: &mut Ctx<'_>, t: TensorId, sizes: &[schema::SymInt]) {
    let inputs: Vec<String> = ctx
        .net
        .inputs()
        .iter()
        .flat_map(|i| i.dims.iter())
        .filter_map(|d| match d {
            Dim::Dynamic { name, .. } => Some(name.clone()),
            Dim::Fixed(_) => None,
        })
        .collect();
    let Some(ty) = ctx.types.get_mut(&t) else {
        return;
    };
    for (dim, size) in ty.shape.iter_mut().zip(sizes) {
        if dim.as_const().is_some() {
            continue;
        }
        let known = match size {
            schema::SymInt::Int(v) => Some(DimExpr::Const(*v)),
            schema::SymInt::Expr(e, _) => parse_expr(e).ok().filter(|e| {
                e.symbols()
                    .iter()
                    .all(|s| inputs.iter().any(|n| **n == **s))
            }),
        };
        if let Some(k) = known {
            *dim = k;
        }
    }
}
