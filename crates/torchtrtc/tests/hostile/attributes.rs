//! Attribute values onnxruntime refuses, and names that would drive a terminal.

use super::onnx::{F32, int, model, node, value};
use super::support::{fails, torchtrtc};
use super::{scratch, write};

#[test]
fn boolean_attributes_are_zero_or_one() {
    for (op, attr) in [("ReduceSum", "keepdims"), ("TopK", "largest")] {
        let inputs: &[&str] = if op == "TopK" { &["x", "k"] } else { &["x"] };
        let mut inits = vec![];
        if op == "TopK" {
            inits.push(super::onnx::i64_init("k", &[1], &[1]));
        }
        let outputs: &[&str] = if op == "TopK" { &["y", "i"] } else { &["y"] };
        let mut outs = vec![value("y", F32, &[])];
        if op == "TopK" {
            outs.push(value("i", super::onnx::I64, &[]));
        }
        let m = model(
            vec![node(op, inputs, outputs, vec![int(attr, 2)])],
            inits,
            vec![value("x", F32, &[2, 3])],
            outs,
        );
        let path = write(&format!("bool_{op}.onnx"), &m);
        let out = torchtrtc([
            "compile".as_ref(),
            path.as_os_str(),
            "-o".as_ref(),
            scratch(&format!("bool_{op}.engine")).as_os_str(),
        ]);
        fails(&out, 1, &[attr, "is 2, expected 0 or 1"]);
    }
}

#[test]
fn names_with_control_characters_are_escaped() {
    let mut n = node("ReduceSum", &["x"], &["y"], vec![int("keepdims", 5)]);
    n.name = Some("evil\x1b[31m\rname\nforged line".into());
    let m = model(
        vec![n],
        vec![],
        vec![value("x", F32, &[2, 3])],
        vec![value("y", F32, &[])],
    );
    let path = write("evil_name.onnx", &m);
    let out = torchtrtc([
        "compile".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        scratch("evil.engine").as_os_str(),
    ]);
    let err = fails(&out, 1, &["evil\\u{1b}[31m\\rname"]);
    assert!(!err.contains('\x1b') && !err.contains('\r'), "{err:?}");
}
