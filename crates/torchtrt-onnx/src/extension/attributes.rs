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
                    d => field_type_of(d).and_then(|f| FieldValue::from_bytes(f, bytes)),
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

/// The field type holding a tensor attribute of dtype `d`; `None` for the unsigned types
/// wider than a byte, which fields have no type for.
fn field_type_of(d: DType) -> Option<torchtrt_core::plugin_api::FieldType> {
    use torchtrt_core::plugin_api::FieldType as F;
    Some(match d {
        DType::F32 => F::F32,
        DType::F16 => F::F16,
        DType::BF16 => F::BF16,
        DType::F64 => F::F64,
        DType::I64 => F::I64,
        DType::I32 => F::I32,
        DType::I16 => F::I16,
        DType::I8 => F::I8,
        DType::U8 | DType::Bool => F::Bytes,
        DType::U16 | DType::U32 | DType::U64 => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};

    fn attr(name: &str, ty: AttributeType) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(ty as i32),
            ..AttributeProto::default()
        }
    }

    #[test]
    fn every_attribute_kind_becomes_a_field() {
        let proto = NodeProto {
            attribute: vec![
                AttributeProto {
                    i: Some(3),
                    ..attr("k", AttributeType::Int)
                },
                AttributeProto {
                    ints: vec![1, -2],
                    ..attr("ks", AttributeType::Ints)
                },
                AttributeProto {
                    f: Some(0.5),
                    ..attr("f", AttributeType::Float)
                },
                AttributeProto {
                    floats: vec![1.5, 2.5],
                    ..attr("fs", AttributeType::Floats)
                },
                AttributeProto {
                    s: Some(b"tanh".to_vec()),
                    ..attr("s", AttributeType::String)
                },
                AttributeProto {
                    strings: vec![b"a".to_vec(), b"bc".to_vec()],
                    ..attr("ss", AttributeType::Strings)
                },
                AttributeProto {
                    t: Some(TensorProto {
                        dims: vec![2, 2],
                        data_type: Some(6),
                        int32_data: vec![1, 2, 3, 4],
                        ..TensorProto::default()
                    }),
                    ..attr("t", AttributeType::Tensor)
                },
            ],
            ..NodeProto::default()
        };
        let f = node_fields(&Node::new(&proto, 0)).unwrap();
        assert_eq!(f.i64s("k"), Some(&[3][..]));
        assert_eq!(f.i64s("ks"), Some(&[1, -2][..]));
        assert_eq!(f.f32s("f"), Some(&[0.5][..]));
        assert_eq!(f.f32s("fs"), Some(&[1.5, 2.5][..]));
        assert_eq!(f.string("s"), Some("tanh"));
        assert_eq!(f.string("ss"), Some("a\0bc"));
        assert_eq!(f.i32s("t"), Some(&[1, 2, 3, 4][..]));
        assert_eq!(f.dims("t.shape"), Some(&[2, 2][..]));
    }

    #[test]
    fn a_graph_attribute_is_an_error_naming_it() {
        let proto = NodeProto {
            name: Some("loop0".into()),
            attribute: vec![AttributeProto {
                g: Some(GraphProto::default()),
                ..attr("body", AttributeType::Graph)
            }],
            ..NodeProto::default()
        };
        let e = node_fields(&Node::new(&proto, 0)).unwrap_err().to_string();
        assert!(
            e.contains("loop0") && e.contains("`body`") && e.contains("GRAPH"),
            "{e}"
        );
    }
}
