//! The ONNX backend suite's `Resize` and `Upsample` node cases, with their `scales`,
//! `sizes` and `roi` graph inputs turned into initializers: the import-time path, where
//! the Interpolate plugin takes the output size as a field (the conformance suite runs the
//! same cases with the values arriving at run time, as a shape input).
//!
//! Data: `scripts/gen_onnx_node_tests.py target/onnx-tests` (`TORCHTRT_ONNX_TESTS` points
//! elsewhere).

use std::path::{Path, PathBuf};

use prost::Message;
use torchtrt::{BuildConfig, Dim, Tensor};
use torchtrt_core::plugin_api::DType;
use torchtrt_onnx::proto::{ModelProto, TensorProto};
use torchtrt_onnx::{ImportOptions, decode_model, import_model, tensor_from_proto};
use torchtrt_testing::{Tol, check_tensor};

fn data_root() -> PathBuf {
    std::env::var_os("TORCHTRT_ONNX_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/onnx-tests"))
}

fn read_pb(path: &Path) -> Result<TensorProto, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    TensorProto::decode(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))
}

/// The model with every graph input but the first made an initializer holding the value of
/// the first test data set, and that value of the first input.
fn freeze_parameters(model: &mut ModelProto, dir: &Path) -> Result<Tensor, String> {
    let graph = model.graph.as_mut().ok_or("no graph")?;
    let set = dir.join("test_data_set_0");
    let mut x = None;
    for (i, input) in std::mem::take(&mut graph.input).into_iter().enumerate() {
        let mut value = read_pb(&set.join(format!("input_{i}.pb")))?;
        if i == 0 {
            x = Some(tensor_from_proto(&value, None)?);
            graph.input.push(input);
        } else {
            value.name = Some(input.name().to_string());
            graph.initializer.push(value);
        }
    }
    x.ok_or_else(|| "the model has no inputs".to_string())
}

/// The shared comparison (NaN only NaN, infinities only themselves), 1e-4 relative for f32.
fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    let tol = match want.dtype() {
        DType::F16 | DType::BF16 => Tol::new(1e-2, 1e-3),
        _ => Tol::new(1e-4, 1e-5),
    };
    check_tensor(got, want, tol)
}

fn run(dir: &Path) -> Result<(), String> {
    let bytes = std::fs::read(dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let mut model = decode_model(&bytes, "model").map_err(|e| e.to_string())?;
    let x = freeze_parameters(&mut model, dir)?;
    let want = tensor_from_proto(&read_pb(&dir.join("test_data_set_0/output_0.pb"))?, None)?;
    let mut options = ImportOptions {
        evaluator: Some(torchtrt::default_backends().remove(0)),
        ..ImportOptions::default()
    };
    let name = model
        .graph
        .as_ref()
        .and_then(|g| g.input.first())
        .map(|i| i.name().to_string());
    let dims = x.shape().iter().map(|&d| Dim::Fixed(d as i64)).collect();
    options.input_dims.insert(name.unwrap_or_default(), dims);
    let net = import_model(&model, Some(dir), torchtrt::registry(), &options)
        .map_err(|e| e.to_string())?;
    let engine = torchtrt::compile(&net, &BuildConfig::default()).map_err(|e| e.to_string())?;
    let outs = engine
        .create_context()
        .unwrap()
        .execute(&[&x])
        .map_err(|e| e.to_string())?;
    let got = outs.first().ok_or("no output")?;
    close(got, &want)
}

#[test]
fn resize_and_upsample_node_cases_with_known_sizes() {
    let root = data_root().join("node");
    assert!(
        root.is_dir(),
        "ONNX test data missing at {}: run `scripts/gen_onnx_node_tests.py`",
        root.display()
    );
    torchtrt::init_plugins().expect("built-in plugins");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("node cases")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("test_resize_") || n.starts_with("test_upsample_"))
        })
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 40, "only {} resize cases found", dirs.len());
    let mut failures = Vec::new();
    for dir in &dirs {
        let case = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Err(e) = run(dir) {
            failures.push(format!("{case}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}
