//! The plugin fallback: an op `ns::name` no converter knows is looked up in the plugin
//! registry as namespace `ns`, name `name`, version `1`. Its tensor arguments become the
//! plugin's inputs, in order, and its other arguments fields by name, through the creator's
//! field schema (ints, floats, bools, strings and their lists).

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::{FieldCollection, FieldSpec, FieldType, FieldValue, PluginKey};

use crate::ctx::{Ctx, Sym};
use crate::error::{Result, TorchError};
use crate::node::{Node, OpName};
use crate::schema::Argument;

/// The registry key an op falls back to.
pub fn plugin_key(op: &OpName) -> PluginKey {
    PluginKey::new(&op.namespace, &op.name, "1")
}

/// Converts `node` into a plugin layer, or `Ok(None)` when the registry has no such key.
pub fn convert(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Option<Vec<TensorId>>> {
    convert_with_key(ctx, node, &plugin_key(&node.op))
}

/// Converts `node` into a layer of the plugin `key`; `Ok(None)` when the registry has no
/// such key.
pub(crate) fn convert_with_key(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    key: &PluginKey,
) -> Result<Option<Vec<TensorId>>> {
    let Some(creator) = ctx.registry.get(key) else {
        return Ok(None);
    };
    let schema = creator.field_schema();
    let (inputs, fields) = split_arguments(ctx, node)?;
    let mut typed = FieldCollection::new();
    for field in fields.iter() {
        let (name, value) = (field.name.as_str(), &field.value);
        let spec = schema.iter().find(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = schema.iter().map(|s| s.name.as_str()).collect();
            node.err(format!(
                "argument `{name}` is not a field of plugin {key} (fields: {})",
                known.join(", ")
            ))
        })?;
        typed.set(name, to_field(node, name, value, spec)?);
    }
    let inputs: Vec<TensorId> = inputs.into_iter().flatten().collect();
    ctx.plugin(node, key, &typed, &inputs).map(Some)
}

/// The node's tensor arguments (in order; `None` for an omitted optional tensor) and its
/// other arguments as fields by name: ints → `i64[]`, floats → `f64[]`, bools → `i64[]`
/// (0/1), strings → string, dtypes → `i64` (torch `ScalarType` code).
pub(crate) fn split_arguments(
    ctx: &Ctx<'_>,
    node: &Node<'_>,
) -> Result<(Vec<Option<TensorId>>, FieldCollection)> {
    let mut inputs = Vec::new();
    let mut fields = FieldCollection::new();
    for (name, arg) in node.args() {
        let value = match arg {
            Argument::Tensor(_) | Argument::OptionalTensor(_) => {
                inputs.push(ctx.opt_tensor(node, name)?);
                continue;
            }
            Argument::Tensors(_) | Argument::OptionalTensors(_) => {
                inputs.extend(ctx.optional_tensors(node, name)?);
                continue;
            }
            Argument::None => continue,
            Argument::Float(_) | Argument::Floats(_) | Argument::SymFloat(_) => {
                FieldValue::F64(ctx.floats(node, name)?.unwrap_or_default())
            }
            Argument::Bool(b) => FieldValue::I64(vec![i64::from(*b)]),
            Argument::Bools(b) => FieldValue::I64(b.iter().map(|&b| i64::from(b)).collect()),
            Argument::String(s) => FieldValue::Char(s.clone()),
            Argument::Strings(s) => FieldValue::Char(s.join("\0")),
            Argument::ScalarType(c) => FieldValue::I64(vec![*c]),
            Argument::Int(_) | Argument::Ints(_) | Argument::SymInt(_) | Argument::SymInts(_) => {
                let syms = ctx.syms(node, name)?.unwrap_or_default();
                let known: Option<Vec<i64>> = syms
                    .iter()
                    .map(|s| match s {
                        Sym::Known(v) => Some(*v),
                        Sym::Tensor(_) => None,
                    })
                    .collect();
                FieldValue::I64(known.ok_or_else(|| {
                    node.err(format!(
                        "argument `{name}` is computed at run time; plugin fields are fixed when the engine is built"
                    ))
                })?)
            }
            other => {
                return Err(node.err(format!(
                    "argument `{name}` of kind {} cannot become a plugin field",
                    other.kind()
                )));
            }
        };
        fields.set(name, value);
    }
    Ok((inputs, fields))
}

fn to_field(node: &Node<'_>, name: &str, raw: &FieldValue, spec: &FieldSpec) -> Result<FieldValue> {
    let bad = |why: String| -> TorchError {
        node.err(format!(
            "argument `{name}` → field of type {}: {why}",
            spec.ty
        ))
    };
    match (spec.ty, raw) {
        (FieldType::Char, FieldValue::Char(_)) => Ok(raw.clone()),
        (FieldType::Char, _) => Err(bad("expected a string".into())),
        (FieldType::Bytes, FieldValue::Char(s)) => Ok(FieldValue::Bytes(s.as_bytes().to_vec())),
        _ => raw
            .convert(spec.ty)
            .ok_or_else(|| bad(format!("cannot convert {}", raw.ty()))),
    }
}
