//! A small ONNX model that runs on the seed plugins: `Resize` (→ `Interpolate`),
//! `InstanceNormalization` (→ `InstanceNormalization_TRT`) and `Gelu`
//! (→ `CustomGeluPluginDynamic`), with a dynamic batch.

use prost::Message;
use torchtrt::onnx::proto::attribute_proto::AttributeType;
use torchtrt::onnx::proto::tensor_shape_proto::Dimension;
use torchtrt::onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use torchtrt::onnx::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use torchtrt::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};

/// Channels of the model's input.
pub const CHANNELS: usize = 3;
/// Height and width of the model's input.
pub const SIZE: usize = 5;
/// The plugin keys the model's engine uses.
pub const PLUGIN_KEYS: [&str; 3] = [
    "torch_tensorrt::Interpolate@1",
    "::InstanceNormalization_TRT@1",
    "::CustomGeluPluginDynamic@1",
];

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        name: Some(format!("{op}_{output}")),
        attribute,
        ..NodeProto::default()
    }
}

/// A node in `domain` (the plugin fallback reads `op_type` as the plugin name).
pub fn custom_node(
    domain: &str,
    op: &str,
    inputs: &[&str],
    output: &str,
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        domain: Some(domain.into()),
        ..node(op, inputs, output, attribute)
    }
}

/// A FLOAT attribute.
pub fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..AttributeProto::default()
    }
}

/// A FLOATS attribute.
pub fn floats_attr(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Floats as i32),
        floats: v.to_vec(),
        ..AttributeProto::default()
    }
}

/// A STRING attribute.
pub fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..AttributeProto::default()
    }
}

fn f32_init(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: v.to_vec(),
        ..TensorProto::default()
    }
}

/// An f32 value-info; `None` dims are symbolic (`N`).
pub fn value(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => DimValue::DimValue(*v),
                None => DimValue::DimParam("N".into()),
            }),
            ..Dimension::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorType {
                elem_type: Some(1),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// A model of one graph at default-domain opset 20, plus the `extra` (domain, version)s.
pub fn model_bytes(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    input: ValueInfoProto,
    output: ValueInfoProto,
    extra: &[(&str, i64)],
) -> Vec<u8> {
    let mut opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(20),
    }];
    opset_import.extend(extra.iter().map(|(d, v)| OperatorSetIdProto {
        domain: Some(d.to_string()),
        version: Some(*v),
    }));
    ModelProto {
        ir_version: Some(9),
        opset_import,
        graph: Some(GraphProto {
            name: Some("capi_test".into()),
            node: nodes,
            initializer: inits,
            input: vec![input],
            output: vec![output],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    }
    .encode_to_vec()
}

/// `image` f32[N, 3, 5, 5] → Resize ×2 (linear) → InstanceNormalization → Gelu →
/// `y` f32[N, 3, 10, 10].
pub fn seed_plugin_model() -> Vec<u8> {
    let c = CHANNELS as i64;
    let s = SIZE as i64;
    let nodes = vec![
        node(
            "Resize",
            &["image", "", "scales"],
            "up",
            vec![string_attr("mode", "linear")],
        ),
        node(
            "InstanceNormalization",
            &["up", "gamma", "beta"],
            "norm",
            vec![float_attr("epsilon", 1e-5)],
        ),
        node("Gelu", &["norm"], "y", vec![]),
    ];
    let inits = vec![
        f32_init("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
        f32_init("gamma", &[c], &[1.0, 0.5, 2.0]),
        f32_init("beta", &[c], &[0.0, 0.25, -0.5]),
    ];
    model_bytes(
        nodes,
        inits,
        value("image", &[None, Some(c), Some(s), Some(s)]),
        value("y", &[None, Some(c), Some(2 * s), Some(2 * s)]),
        &[],
    )
}
