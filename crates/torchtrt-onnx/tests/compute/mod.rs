//! Support for the compute-converter tests: running a small ONNX model end to end (import,
//! compile, CPU execution) with chosen dims left dynamic, and a closeness check against a
//! plain f64 reference.

#![allow(dead_code)]

use proptest::test_runner::TestCaseError;
use torchtrt::{BuildConfig, Dim, Tensor};
use torchtrt_onnx::proto::attribute_proto::AttributeType;
use torchtrt_onnx::proto::{AttributeProto, ModelProto};
use torchtrt_onnx::{ImportOptions, import_model};

use crate::common::random_f32;

/// Imports `m` with the dims of `inputs` (given in graph order), leaving each
/// `(input, axis)` of `dynamic` symbolic, then compiles and runs it.
pub fn run(
    m: &ModelProto,
    inputs: &[(&str, &Tensor)],
    dynamic: &[(&str, usize)],
) -> Result<Vec<Tensor>, String> {
    let net = import(m, inputs, dynamic)?;
    let engine = torchtrt::compile(&net, &BuildConfig::default()).map_err(|e| e.to_string())?;
    let values: Vec<&Tensor> = inputs.iter().map(|(_, t)| *t).collect();
    engine
        .create_context()
        .unwrap()
        .execute(&values)
        .map_err(|e| e.to_string())
}

/// Imports `m` as [`run`] does, without compiling it.
pub fn import(
    m: &ModelProto,
    inputs: &[(&str, &Tensor)],
    dynamic: &[(&str, usize)],
) -> Result<torchtrt_core::NetworkDefinition, String> {
    torchtrt::init_plugins().map_err(|e| e.to_string())?;
    let mut options = ImportOptions {
        evaluator: Some(torchtrt::default_backends().remove(0)),
        ..ImportOptions::default()
    };
    for (name, t) in inputs {
        let dims = t
            .shape()
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if dynamic.contains(&(*name, i)) {
                    Dim::dynamic(&format!("{name}.{i}"), 1, d as i64, 64)
                } else {
                    Dim::Fixed(d as i64)
                }
            })
            .collect();
        options.input_dims.insert(name.to_string(), dims);
    }
    import_model(m, None, torchtrt::registry(), &options).map_err(|e| e.to_string())
}

/// A random f32 tensor in [-2, 2).
pub fn random(shape: &[usize], seed: u64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(shape, random_f32(n, seed)).expect("shape and values agree")
}

/// The tensor's elements as f64.
pub fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec()
}

/// Checks `got` against `want` with the shared comparison: the shape, and each value within
/// `tol·(1 + |want|)` (infinities and NaN only themselves).
pub fn check(got: &Tensor, shape: &[usize], want: &[f64], tol: f64) -> Result<(), TestCaseError> {
    if got.shape() != shape {
        return Err(TestCaseError::fail(format!(
            "shape {:?}, want {shape:?}",
            got.shape()
        )));
    }
    torchtrt_testing::check_floats(
        &got.to_f64_vec(),
        want,
        torchtrt_testing::Tol::new(tol, tol),
    )
    .map_err(|m| TestCaseError::fail(m.in_shape(shape).to_string()))
}

/// Shorthand: a `String` error as a proptest failure.
pub fn fail(e: String) -> TestCaseError {
    TestCaseError::fail(e)
}

/// The row-major coordinates of flat index `i` in `shape`.
pub fn coords(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        c[d] = i % n;
        i /= n;
    }
    c
}

/// The flat row-major index of `c` in `shape`.
pub fn flat(c: &[usize], shape: &[usize]) -> usize {
    c.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// A FLOAT attribute.
pub fn float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..AttributeProto::default()
    }
}
