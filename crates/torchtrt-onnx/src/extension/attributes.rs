//! ONNX attributes as the fields a custom converter receives (see `docs/plugin-abi.md`).

use torchtrt_core::plugin_api::{DType, FieldCollection, FieldValue};

use crate::error::Result;
use crate::node::Node;
use crate::proto::attribute_proto::AttributeType;

/// Every attribute of `node` as a field: INT → `i64[1]`, INTS → `i64[n]`, FLOAT → `f32[1]`,
/// FLOATS → `f32[n]`, STRING → string, STRINGS → string with NUL-separated items, TENSOR →
/// its elements plus `<name>.shape`. Graph attributes are an error naming the attribute.
pub(crate) fn node_fields(node: &Node<'_>) -> Result<FieldCollection> {
    let mut out = FieldCollection::new();
    for attr in &node.proto.attribute {
        let name = attr.name();
        let utf8 = |b: &[u8]| {
            String::from_utf8(b.to_vec())
                .map_err(|_| node.err(format!("attribute `{name}` is not UTF-8")))
        };
        let value = match attr.r#type() {
            AttributeType::Int => FieldValue::I64(vec![attr.i()]),
            AttributeType::Ints => FieldValue::I64(attr.ints.clone()),
            AttributeType::Float => FieldValue::F32(vec![attr.f()]),
            AttributeType::Floats => FieldValue::F32(attr.floats.clone()),
            AttributeType::String => FieldValue::Char(utf8(attr.s())?),
            AttributeType::Strings => {
                let items = attr
                    .strings
                    .iter()
                    .map(|s| utf8(s))
                    .collect::<Result<Vec<_>>>()?;
                FieldValue::Char(items.join("\0"))
            }
            AttributeType::Tensor => {
                let t = node
                    .tensor(name)?
                    .ok_or_else(|| node.err(format!("attribute `{name}` has no tensor")))?;
                let bytes = t.bytes();
                let value = match t.dtype() {
                    DType::Bool | DType::U8 => Some(FieldValue::Bytes(bytes.to_vec())),
                    d => FieldValue::from_bytes(field_type_of(d), bytes),
                };
                let shape = t.shape().iter().map(|&d| d as i64).collect();
                out.set(&format!("{name}.shape"), FieldValue::Dims(shape));
                value.ok_or_else(|| node.err(format!("attribute `{name}`: unreadable tensor")))?
            }
            other => {
                return Err(node.err(format!(
                    "attribute `{name}` of type {} cannot be passed to a custom converter",
                    other.as_str_name()
                )));
            }
        };
        out.set(name, value);
    }
    Ok(out)
}

fn field_type_of(d: DType) -> torchtrt_core::plugin_api::FieldType {
    use torchtrt_core::plugin_api::FieldType as F;
    match d {
        DType::F32 => F::F32,
        DType::F16 => F::F16,
        DType::BF16 => F::BF16,
        DType::F64 => F::F64,
        DType::I64 => F::I64,
        DType::I32 => F::I32,
        DType::I16 => F::I16,
        DType::I8 => F::I8,
        DType::U8 | DType::Bool => F::Bytes,
    }
}
