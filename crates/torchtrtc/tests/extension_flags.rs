//! `--custom-converters`, `--custom-torch-ops` and `--override-converters`, with the example
//! libraries built as real `cdylib`s: a model using their ops compiles and runs through the
//! flags alone, checked against a plain reference; a missing library fails with exit 1.

use std::path::{Path, PathBuf};
use std::process::Output;

#[path = "../../torchtrt/tests/common/examples.rs"]
mod examples;
mod support;

use examples::build_example;
use prost::Message;
use support::{scratch_in, torchtrtc, write_npy};
use torchtrt::onnx::proto::attribute_proto::AttributeType;
use torchtrt::onnx::proto::tensor_shape_proto::Dimension;
use torchtrt::onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use torchtrt::onnx::proto::type_proto::{Tensor as TensorType, Value as TypeValue};
use torchtrt::onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};

const SHAPE: [usize; 2] = [3, 8];

fn scratch(name: &str) -> PathBuf {
    scratch_in("ext-flags", name)
}

fn check(out: &Output, code: i32, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{err}",
        String::from_utf8_lossy(&out.stdout)
    );
    for n in needles {
        assert!(err.contains(n), "`{n}` missing from:\n{err}");
    }
}

fn value(name: &str) -> ValueInfoProto {
    let dim = |d: usize| Dimension {
        value: Some(DimValue::DimValue(d as i64)),
        ..Dimension::default()
    };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(TypeValue::TensorType(TensorType {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: SHAPE.iter().map(|&d| dim(d)).collect(),
                }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// `y = com.example::op(x; float attrs)` written to `<file>.onnx`.
fn model(file: &str, op: &str, attrs: &[(&str, f32)]) -> PathBuf {
    let attribute = attrs
        .iter()
        .map(|&(name, v)| AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Float as i32),
            f: Some(v),
            ..AttributeProto::default()
        })
        .collect();
    let opset = |d: &str, v| OperatorSetIdProto {
        domain: Some(d.into()),
        version: Some(v),
    };
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![opset("", 17), opset("com.example", 1)],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: vec![NodeProto {
                op_type: Some(op.into()),
                domain: Some("com.example".into()),
                name: Some(format!("{op}_0")),
                input: vec!["x".into()],
                output: vec!["y".into()],
                attribute,
                ..NodeProto::default()
            }],
            input: vec![value("x")],
            output: vec![value("y")],
            ..GraphProto::default()
        }),
        ..ModelProto::default()
    };
    let path = scratch(&format!("{file}.onnx"));
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

fn write_f32(path: &Path, values: &[f32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(path, "<f4", &SHAPE, &bytes);
}

/// `x.npy` of pseudo-random values in [-4, 4) and `<name>.npy` = `f(x)`.
fn data(name: &str, f: impl Fn(f32) -> f32) -> (PathBuf, PathBuf) {
    let n = SHAPE.iter().product::<usize>();
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 97) as f32 / 97.0) * 8.0 - 4.0)
        .collect();
    let y: Vec<f32> = x.iter().map(|&v| f(v)).collect();
    let (xp, yp) = (
        scratch(&format!("{name}_x.npy")),
        scratch(&format!("{name}_y.npy")),
    );
    write_f32(&xp, &x);
    write_f32(&yp, &y);
    (xp, yp)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn custom_torch_ops_compile_and_run_through_the_flag_alone() {
    let lib = build_example("custom_op_rust", "torchtrt_example_custom_op_rust");
    let onnx = model("hard_swish", "HardSwishCustom", &[("alpha", 0.5)]);
    let engine = scratch("hard_swish.engine");
    check(
        &torchtrtc([
            "compile",
            s(&onnx),
            "-o",
            s(&engine),
            "--custom-torch-ops",
            s(&lib),
        ]),
        0,
        &[],
    );
    let (x, y) = data("hard_swish", |v| 0.5 * v * (v + 3.0).clamp(0.0, 6.0) / 6.0);
    let input = format!("x={}", s(&x));
    let reference = format!("y={}", s(&y));
    let run = torchtrtc([
        "run",
        s(&engine),
        "--input",
        &input,
        "--check",
        &reference,
        "--custom-torch-ops",
        s(&lib),
    ]);
    check(&run, 0, &[]);
    assert!(String::from_utf8_lossy(&run.stdout).contains("check y: ok"));
    check(
        &torchtrtc(["run", s(&engine), "--input", &input, "--plugins", s(&lib)]),
        0,
        &[],
    );
    let inspect = torchtrtc(["inspect", s(&engine), "--plugins", s(&lib)]);
    check(&inspect, 0, &[]);
    let shown = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        shown.contains("com.example::HardSwishCustom@1")
            && shown.contains("deployment needs")
            && shown.contains("libtorchtrt_example_custom_op_rust.so"),
        "{shown}"
    );
    check(
        &torchtrtc(["run", s(&engine), "--input", &input]),
        1,
        &[
            "com.example::HardSwishCustom",
            "libtorchtrt_example_custom_op_rust.so",
        ],
    );
    check(
        &torchtrtc(["compile", s(&onnx), "-o", s(&engine)]),
        1,
        &["HardSwishCustom_0", "no converter"],
    );
}

#[test]
fn custom_converters_compile_and_run_through_the_flag() {
    let lib = build_example("converter_rust", "torchtrt_example_converter_rust");
    let onnx = model("fsb", "FusedScaleBias", &[("scale", -2.0), ("bias", 0.5)]);
    let engine = scratch("fsb.engine");
    check(
        &torchtrtc([
            "compile",
            s(&onnx),
            "-o",
            s(&engine),
            "--custom-converters",
            s(&lib),
            "--override-converters",
        ]),
        0,
        &[],
    );
    let (x, y) = data("fsb", |v| v * -2.0 + 0.5);
    let run = torchtrtc([
        "run",
        s(&engine),
        "--input",
        &format!("x={}", s(&x)),
        "--check",
        &format!("y={}", s(&y)),
    ]);
    check(&run, 0, &[]);
    assert!(String::from_utf8_lossy(&run.stdout).contains("check y: ok"));
}

#[test]
fn a_library_that_fails_to_load_is_exit_1_with_the_reason() {
    let onnx = model("never_read", "FusedScaleBias", &[("scale", 1.0)]);
    for flag in ["--custom-converters", "--custom-torch-ops"] {
        let out = torchtrtc([
            "compile",
            s(&onnx),
            "-o",
            s(&scratch("never.engine")),
            flag,
            "/nonexistent/libext.so",
        ]);
        check(&out, 1, &[flag, "/nonexistent/libext.so", "does not exist"]);
    }
}
