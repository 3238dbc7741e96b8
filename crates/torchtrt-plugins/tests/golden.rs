//! Runs every case of `tests/golden/manifest.json` (written by
//! `scripts/gen_plugin_goldens.py` from PyTorch or ONNX's reference implementation): the
//! plugin is created from the case's fields through its built-in creator and run on the
//! stored input in the case's dtype; shape and values must match within the case's
//! tolerance. A case that cannot run is a failure, never a skip.

#[path = "common/harness.rs"]
mod harness;
#[path = "common/json.rs"]
mod json;
#[path = "common/npy.rs"]
mod npy;

use std::path::{Path, PathBuf};

use json::Json;
use torchtrt_plugin_api::{DType, FieldCollection, FieldValue};
use torchtrt_plugins::register;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
}

/// A field element as f64, accepting the manifest's `"inf"`, `"-inf"`, `"nan"` strings.
fn number(v: &Json) -> Result<f64, String> {
    match v {
        Json::Num(x) => Ok(*x),
        Json::Str(s) => s.parse().map_err(|_| format!("`{s}` is not a number")),
        other => Err(format!("{other:?} is not a number")),
    }
}

/// The manifest's typed field value.
fn field_value(spec: &Json) -> Result<FieldValue, String> {
    let ty = spec
        .get("type")
        .and_then(Json::as_str)
        .ok_or("field without type")?;
    let value = spec.get("value").ok_or("field without value")?;
    if ty == "string" {
        return value
            .as_str()
            .map(FieldValue::from)
            .ok_or("string field".into());
    }
    let items = match value {
        Json::Arr(items) => items.iter().map(number).collect::<Result<Vec<_>, _>>()?,
        scalar => vec![number(scalar)?],
    };
    Ok(match ty {
        "f32" => FieldValue::F32(items.iter().map(|&v| v as f32).collect()),
        "f64" => FieldValue::F64(items),
        "i32" => FieldValue::I32(items.iter().map(|&v| v as i32).collect()),
        "i64" => FieldValue::I64(items.iter().map(|&v| v as i64).collect()),
        other => return Err(format!("unknown field type {other}")),
    })
}

/// Runs one case; `Err` says why it failed.
fn run_case(case: &Json) -> Result<(), String> {
    let text = |k: &str| {
        case.get(k)
            .and_then(Json::as_str)
            .ok_or(format!("missing `{k}`"))
    };
    let (name, namespace, version) = (text("plugin")?, text("namespace")?, text("version")?);
    let creator = register::creators()
        .into_iter()
        .find(|c| {
            let k = c.key();
            k.name == name && k.namespace == namespace && k.version == version
        })
        .ok_or(format!("no built-in creator {namespace}::{name}@{version}"))?;
    let mut fields = FieldCollection::new();
    if let Some(Json::Obj(members)) = case.get("fields") {
        for (k, spec) in members {
            fields.set(
                k,
                field_value(spec).map_err(|e| format!("field `{k}`: {e}"))?,
            );
        }
    }
    let dtype = match text("dtype")? {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        other => return Err(format!("unknown dtype {other}")),
    };
    let input = npy::read(&golden_dir().join(text("input")?))?;
    let expected = npy::read(&golden_dir().join(text("expected")?))?;
    let out = harness::run(
        creator.as_ref(),
        &fields,
        &input.shape,
        &input.values,
        dtype,
        2,
    )
    .map_err(|e| e.to_string())?;
    if out.shape != expected.shape {
        return Err(format!(
            "output shape {:?}, expected {:?}",
            out.shape, expected.shape
        ));
    }
    let atol = case
        .get("atol")
        .and_then(Json::as_f64)
        .ok_or("missing atol")?;
    let rtol = case
        .get("rtol")
        .and_then(Json::as_f64)
        .ok_or("missing rtol")?;
    torchtrt_testing::check_floats(
        &out.values,
        &expected.values,
        torchtrt_testing::Tol::new(rtol, atol),
    )
    .map_err(|m| {
        let shape: Vec<usize> = out.shape.iter().map(|&d| d as usize).collect();
        m.in_shape(&shape).to_string()
    })?;
    Ok(())
}

#[test]
fn every_manifest_case_matches() {
    let path = golden_dir().join("manifest.json");
    let text = std::fs::read_to_string(&path).expect("manifest.json is readable");
    let manifest = json::parse(&text).expect("manifest.json parses");
    let Some(Json::Arr(cases)) = manifest.get("cases") else {
        panic!("manifest.json has no `cases` array");
    };
    assert!(!cases.is_empty(), "manifest.json lists no cases");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let name = case
                .get("name")
                .and_then(Json::as_str)
                .unwrap_or("<unnamed>");
            let source = case.get("source").and_then(Json::as_str).unwrap_or("?");
            run_case(case)
                .err()
                .map(|e| format!("{name} ({source}): {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn npy_reader_round_trips_headers() {
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in 0..6 {
        bytes.extend_from_slice(&(v as f32).to_le_bytes());
    }
    let a = npy::parse(&bytes).expect("parses");
    assert_eq!(
        (a.shape, a.values),
        (vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    );
    assert!(npy::parse(b"not numpy").is_err());
}
