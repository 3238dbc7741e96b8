//! One-node ONNX models of custom-domain ops, and running them, for the extension tests.

#![allow(dead_code)]

use std::path::PathBuf;

use torchtrt::onnx::proto::attribute_proto::AttributeType;
use torchtrt::onnx::proto::tensor_shape_proto::Dimension;
use torchtrt::onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use torchtrt::onnx::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use torchtrt::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use torchtrt::{BuildConfig, Engine, Tensor};

/// A FLOAT attribute.
pub fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..AttributeProto::default()
    }
}

/// An f32 value of shape `[n, width]` with `n` dynamic.
fn value(name: &str, width: i64) -> ValueInfoProto {
    let dim = |v| Dimension {
        value: Some(v),
        ..Dimension::default()
    };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorType {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: vec![
                        dim(DimValue::DimParam("n".into())),
                        dim(DimValue::DimValue(width)),
                    ],
                }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// `y = domain::op(x; attrs)` in a node called `name`, `x` and `y` of shape `[n, 8]`, written
/// to a file of its own; returns the path.
pub fn one_node_model(name: &str, domain: &str, op: &str, attrs: Vec<AttributeProto>) -> PathBuf {
    model_with_weight(name, domain, op, attrs, None, 8)
}

/// [`one_node_model`] with an optional second input `w`, an f32 initializer of `dims`, and
/// an output of shape `[n, out_width]`.
pub fn model_with_weight(
    name: &str,
    domain: &str,
    op: &str,
    attrs: Vec<AttributeProto>,
    weight: Option<(&[i64], &[f32])>,
    out_width: i64,
) -> PathBuf {
    let initializer: Vec<TensorProto> = weight
        .iter()
        .map(|(dims, v)| TensorProto {
            name: Some("w".into()),
            dims: dims.to_vec(),
            data_type: Some(1),
            float_data: v.to_vec(),
            ..TensorProto::default()
        })
        .collect();
    let mut inputs = vec!["x".to_string()];
    inputs.extend(initializer.iter().map(|t| t.name().to_string()));
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: [("", 17), (domain, 1)]
            .into_iter()
            .filter(|&(d, v)| v == 17 || !d.is_empty())
            .map(|(d, v)| OperatorSetIdProto {
                domain: Some(d.into()),
                version: Some(v),
            })
            .collect(),
        graph: Some(GraphProto {
            name: Some("extension_test".into()),
            node: vec![NodeProto {
                op_type: Some(op.into()),
                domain: Some(domain.into()),
                name: Some(name.into()),
                input: inputs,
                output: vec!["y".into()],
                attribute: attrs,
                ..NodeProto::default()
            }],
            initializer,
            input: vec![value("x", 8)],
            output: vec![value("y", out_width)],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    };
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ext-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let path = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, prost::Message::encode_to_vec(&model)).expect("model written");
    path
}

/// Imports and compiles a model with the default options (extension converters included).
pub fn compile(path: &PathBuf) -> Result<Engine, String> {
    let net = torchtrt::import_onnx(path, torchtrt::onnx::ImportOptions::default())
        .map_err(|e| e.to_string())?;
    torchtrt::compile(&net, &BuildConfig::default()).map_err(|e| e.to_string())
}

/// Runs an engine on `x` of shape `[n, 8]` and returns `y`.
pub fn run(engine: &Engine, x: &[f32]) -> Result<Vec<f32>, String> {
    let input = Tensor::from_vec(&[x.len() / 8, 8], x.to_vec()).map_err(|e| e.to_string())?;
    let out = engine
        .create_context()
        .unwrap()
        .execute(&[&input])
        .map_err(|e| e.to_string())?;
    Ok(out[0]
        .as_slice::<f32>()
        .map_err(|e| e.to_string())?
        .to_vec())
}
