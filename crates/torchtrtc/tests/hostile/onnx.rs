//! Small ONNX models written by the tests themselves.

use prost::Message;
use torchtrt::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, tensor_shape_proto, type_proto,
};

/// ONNX `FLOAT`.
pub const F32: i32 = 1;
/// ONNX `INT64`.
pub const I64: i32 = 7;

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_0")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..NodeProto::default()
    }
}

pub fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(7),
        ints: v.to_vec(),
        ..AttributeProto::default()
    }
}

pub fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(2),
        i: Some(v),
        ..AttributeProto::default()
    }
}

pub fn i64_init(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(I64),
        int64_data: v.to_vec(),
        ..TensorProto::default()
    }
}

pub fn f32_init(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(F32),
        float_data: v.to_vec(),
        ..TensorProto::default()
    }
}

/// A graph input or output; a negative dim is symbolic (`d0`, `d1`, …).
pub fn value(name: &str, ty: i32, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .enumerate()
        .map(|(i, &d)| tensor_shape_proto::Dimension {
            value: Some(if d < 0 {
                tensor_shape_proto::dimension::Value::DimParam(format!("d{i}"))
            } else {
                tensor_shape_proto::dimension::Value::DimValue(d)
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(ty),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// The encoded model of one graph, opset 17.
pub fn model(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("hostile".into()),
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs,
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
    .encode_to_vec()
}
