//! The plugin fallback (onnx-tensorrt's fallback importer): a node no converter knows is
//! looked up in the plugin registry by name = `op_type`, namespace = attribute
//! `plugin_namespace` (else the node's domain), version = attribute `plugin_version`
//! (else `1`); the other attributes become fields through the creator's schema.

use torchtrt_core::TensorId;
use torchtrt_core::plugin_api::{FieldCollection, FieldSpec, FieldType, FieldValue, PluginKey};

use crate::ctx::Ctx;
use crate::error::{OnnxError, Result};
use crate::node::Node;
use crate::proto::AttributeProto;
use crate::proto::attribute_proto::AttributeType;

/// The registry key a node falls back to.
pub fn plugin_key(node: &Node<'_>) -> Result<PluginKey> {
    let namespace = node
        .string("plugin_namespace")?
        .unwrap_or_else(|| node.domain().to_string());
    let version = node
        .string("plugin_version")?
        .unwrap_or_else(|| "1".to_string());
    Ok(PluginKey::new(&namespace, node.op_type(), &version))
}

/// Converts `node` into a plugin layer, or `Ok(None)` when the registry has no such key.
pub fn convert(ctx: &mut Ctx<'_>, node: &Node<'_>) -> Result<Option<Vec<TensorId>>> {
    let key = plugin_key(node)?;
    convert_with_key(ctx, node, &key)
}

/// Converts `node` into a layer of the plugin `key`, its attributes becoming fields by the
/// creator's schema; `Ok(None)` when the registry has no such key.
pub(crate) fn convert_with_key(
    ctx: &mut Ctx<'_>,
    node: &Node<'_>,
    key: &PluginKey,
) -> Result<Option<Vec<TensorId>>> {
    let key = key.clone();
    let Some(creator) = ctx.registry.get(&key) else {
        return Ok(None);
    };
    let schema = creator.field_schema();
    let mut fields = FieldCollection::new();
    for attr in &node.proto.attribute {
        let name = attr.name();
        if name == "plugin_namespace" || name == "plugin_version" {
            continue;
        }
        let spec = schema.iter().find(|s| s.name == name).ok_or_else(|| {
            let known: Vec<&str> = schema.iter().map(|s| s.name.as_str()).collect();
            node.err(format!(
                "attribute `{name}` is not a field of plugin {key} (fields: {})",
                known.join(", ")
            ))
        })?;
        fields.set(name, attribute_to_field(node, attr, spec)?);
    }
    let inputs = ctx.inputs(node)?;
    ctx.plugin(node, &key, &fields, &inputs).map(Some)
}

fn attribute_to_field(
    node: &Node<'_>,
    attr: &AttributeProto,
    spec: &FieldSpec,
) -> Result<FieldValue> {
    let name = attr.name();
    let bad = |why: String| -> OnnxError {
        node.err(format!(
            "attribute `{name}` → field of type {}: {why}",
            spec.ty
        ))
    };
    let raw = match attr.r#type() {
        AttributeType::Int => FieldValue::I64(vec![attr.i()]),
        AttributeType::Ints => FieldValue::I64(attr.ints.clone()),
        AttributeType::Float => FieldValue::F32(vec![attr.f()]),
        AttributeType::Floats => FieldValue::F32(attr.floats.clone()),
        AttributeType::String => {
            if spec.ty == FieldType::Bytes {
                return Ok(FieldValue::Bytes(attr.s().to_vec()));
            }
            FieldValue::Char(
                String::from_utf8(attr.s().to_vec()).map_err(|_| bad("not UTF-8".into()))?,
            )
        }
        AttributeType::Tensor => {
            let t = attr.t.as_ref().ok_or_else(|| bad("empty tensor".into()))?;
            let t = crate::tensor::tensor_from_proto(t, None).map_err(bad)?;
            if spec.ty == FieldType::Bytes {
                return Ok(FieldValue::Bytes(t.bytes().to_vec()));
            }
            match t.to_i64_vec() {
                Some(v) => FieldValue::I64(v),
                None => FieldValue::F64(t.to_f64_vec()),
            }
        }
        other => {
            return Err(bad(format!(
                "{} attributes cannot become fields",
                other.as_str_name()
            )));
        }
    };
    if spec.ty == FieldType::Char {
        return match raw {
            FieldValue::Char(_) => Ok(raw),
            _ => Err(bad("expected a string".into())),
        };
    }
    raw.convert(spec.ty)
        .ok_or_else(|| bad(format!("cannot convert {}", raw.ty())))
}
