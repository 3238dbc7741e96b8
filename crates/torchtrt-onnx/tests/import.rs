//! Import behaviour beyond single ops: external data, shape arithmetic with static and
//! dynamic dims, errors for unknown ops and bad files.

mod common;

use common::{f32_init, i64_init, int, ints, model, node, random_f32, value};
use torchtrt::{BuildConfig, Dim, Tensor};
use torchtrt_onnx::proto::tensor_proto::DataLocation;
use torchtrt_onnx::proto::{ModelProto, StringStringEntryProto, TensorProto};
use torchtrt_onnx::{ImportOptions, OnnxError, import_file, import_model};

fn options() -> ImportOptions {
    torchtrt::init_plugins().unwrap();
    ImportOptions {
        evaluator: Some(torchtrt::default_backends().remove(0)),
        ..ImportOptions::default()
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn save(m: &ModelProto, path: &std::path::Path) {
    use prost::Message;
    std::fs::write(path, m.encode_to_vec()).unwrap();
}

#[test]
fn external_data_is_read_next_to_the_model() {
    let dir = scratch("external");
    let w = random_f32(12, 4);
    let mut bytes = vec![0u8; 16];
    bytes.extend(w.iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(dir.join("weights.bin"), &bytes).unwrap();
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let weight = TensorProto {
        name: Some("w".into()),
        dims: vec![4, 3],
        data_type: Some(1),
        data_location: Some(DataLocation::External as i32),
        external_data: vec![
            entry("location", "weights.bin"),
            entry("offset", "16"),
            entry("length", "48"),
        ],
        ..TensorProto::default()
    };
    let m = model(
        vec![node("MatMul", &["x", "w"], &["y"], vec![])],
        vec![weight],
        vec![value("x", 1, &[2, 4])],
        vec![value("y", 1, &[2, 3])],
        13,
    );
    save(&m, &dir.join("model.onnx"));
    let net = import_file(dir.join("model.onnx"), torchtrt::registry(), &options()).unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let xs = random_f32(8, 5);
    let out = engine
        .create_context()
        .unwrap()
        .execute(&[&Tensor::from_vec(&[2, 4], xs.clone()).unwrap()])
        .unwrap();
    let got = out[0].as_slice::<f32>().unwrap();
    for i in 0..2 {
        for j in 0..3 {
            let want: f32 = (0..4).map(|k| xs[i * 4 + k] * w[k * 3 + j]).sum();
            assert!((got[i * 3 + j] - want).abs() < 1e-5);
        }
    }

    std::fs::write(dir.join("weights.bin"), &bytes[..30]).unwrap();
    let err = import_file(dir.join("model.onnx"), torchtrt::registry(), &options())
        .unwrap_err()
        .to_string();
    assert!(err.contains("`w`") && err.contains("weights.bin"), "{err}");

    let mut escape = m.clone();
    let g = escape.graph.as_mut().unwrap();
    g.initializer[0].external_data[0] = entry("location", "../weights.bin");
    save(&escape, &dir.join("escape.onnx"));
    let err = import_file(dir.join("escape.onnx"), torchtrt::registry(), &options())
        .unwrap_err()
        .to_string();
    assert!(err.contains("inside the model's folder"), "{err}");
}

/// `reshape(x, [shape(x)[0], 12])`, the Shape → Gather → Concat → Reshape chain exporters emit.
fn flatten_by_shape_arithmetic() -> ModelProto {
    model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["n"], vec![int("axis", 0)]),
            node("Unsqueeze", &["n", "axes0"], &["n1"], vec![]),
            node(
                "Concat",
                &["n1", "twelve"],
                &["shape"],
                vec![int("axis", 0)],
            ),
            node("Reshape", &["x", "shape"], &["y"], vec![]),
        ],
        vec![
            i64_init("zero", &[], &[0]),
            i64_init("axes0", &[1], &[0]),
            i64_init("twelve", &[1], &[12]),
        ],
        vec![value("x", 1, &[2, 3, 4])],
        vec![value("y", 1, &[2, 12])],
        13,
    )
}

#[test]
fn shape_arithmetic_folds_with_static_dims() {
    let net = import_model(
        &flatten_by_shape_arithmetic(),
        None,
        torchtrt::registry(),
        &options(),
    )
    .unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let kinds: Vec<&str> = engine
        .plan()
        .layers
        .iter()
        .map(|l| l.kind.op().kind())
        .collect();
    assert_eq!(kinds, ["Constant", "Reshape"]);
}

#[test]
fn shape_arithmetic_runs_with_dynamic_dims() {
    let mut opts = options();
    opts.input_dims.insert(
        "x".into(),
        vec![Dim::dynamic("batch", 1, 2, 8), Dim::Fixed(3), Dim::Fixed(4)],
    );
    let net = import_model(
        &flatten_by_shape_arithmetic(),
        None,
        torchtrt::registry(),
        &opts,
    )
    .unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let kinds: Vec<&str> = engine
        .plan()
        .layers
        .iter()
        .map(|l| l.kind.op().kind())
        .collect();
    assert!(kinds.contains(&"Shape"), "{kinds:?}");
    let reloaded = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&engine.serialize())
        .unwrap();
    let mut ctx = reloaded.create_context().unwrap();
    for n in [1usize, 5, 8] {
        let xs = random_f32(n * 12, n as u64);
        let out = ctx
            .execute(&[&Tensor::from_vec(&[n, 3, 4], xs.clone()).unwrap()])
            .unwrap();
        assert_eq!(out[0].shape(), &[n, 12]);
        assert_eq!(out[0].as_slice::<f32>().unwrap(), xs.as_slice());
    }
}

/// `split(reshape(x, [shape(x)[0], shape(x)[1], 3, 4]), 3 equal parts, axis 2)` under a
/// dynamic batch and sequence, as `torch.export` writes GPT-2's packed q/k/v: the reshape's
/// dims follow from the shape arithmetic, so the split's axis is known (3) at import.
#[test]
fn a_reshape_to_computed_dims_splits_into_known_parts() {
    let m = model(
        vec![
            node("Shape", &["x"], &["s"], vec![int("end", 2)]),
            node("Concat", &["s", "heads"], &["shape"], vec![int("axis", 0)]),
            node("Reshape", &["x", "shape"], &["r"], vec![]),
            node(
                "Split",
                &["r"],
                &["y0", "y1", "y2"],
                vec![int("axis", 2), int("num_outputs", 3)],
            ),
        ],
        vec![i64_init("heads", &[2], &[3, 4])],
        vec![value("x", 1, &[2, 5, 12])],
        ["y0", "y1", "y2"]
            .map(|y| value(y, 1, &[2, 5, 1, 4]))
            .to_vec(),
        18,
    );
    let mut opts = options();
    opts.input_dims.insert(
        "x".into(),
        vec![
            Dim::dynamic("batch", 1, 2, 4),
            Dim::dynamic("seq", 1, 5, 9),
            Dim::Fixed(12),
        ],
    );
    let net = import_model(&m, None, torchtrt::registry(), &opts).unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for (b, t) in [(1usize, 9usize), (3, 2)] {
        let xs = random_f32(b * t * 12, (b * t) as u64);
        let out = ctx
            .execute(&[&Tensor::from_vec(&[b, t, 12], xs.clone()).unwrap()])
            .unwrap();
        for (part, y) in out.iter().enumerate() {
            assert_eq!(y.shape(), &[b, t, 1, 4]);
            let want: Vec<f32> = xs
                .chunks(12)
                .flat_map(|row| row[part * 4..part * 4 + 4].to_vec())
                .collect();
            assert_eq!(y.as_slice::<f32>().unwrap(), want.as_slice(), "part {part}");
        }
    }
}

#[test]
fn unknown_ops_and_bad_files_are_named_errors() {
    let m = model(
        vec![node("FrobnicateX", &["x"], &["y"], vec![ints("k", &[1])])],
        vec![f32_init("unused", &[1], &[0.0])],
        vec![value("x", 1, &[2])],
        vec![value("y", 1, &[2])],
        17,
    );
    match import_model(&m, None, torchtrt::registry(), &options()).unwrap_err() {
        OnnxError::Unsupported {
            node, op_type, key, ..
        } => {
            assert_eq!(op_type, "FrobnicateX");
            assert_eq!(key, "::FrobnicateX@1");
            assert!(node.contains("FrobnicateX"));
        }
        other => panic!("expected Unsupported, got {other}"),
    }
    let dir = scratch("bad");
    std::fs::write(
        dir.join("junk.onnx"),
        b"\x08\x01\x12\x04oops this is not protobuf",
    )
    .unwrap();
    let err = import_file(dir.join("junk.onnx"), torchtrt::registry(), &options()).unwrap_err();
    assert!(matches!(err, OnnxError::Decode { .. }), "{err}");
    let err = import_file(dir.join("missing.onnx"), torchtrt::registry(), &options()).unwrap_err();
    assert!(matches!(err, OnnxError::Io { .. }), "{err}");
}

#[test]
fn plugin_fallback_turns_attributes_into_fields() {
    let mut n = node(
        "Interpolate",
        &["x"],
        &["y"],
        vec![ints("out_size", &[7, 7])],
    );
    n.domain = Some("torch_tensorrt".into());
    n.attribute
        .push(common::string("mode", "adaptive_max_pool2d"));
    let mut m = model(
        vec![n],
        vec![],
        vec![value("x", 1, &[1, 2, 30, 45])],
        vec![value("y", 1, &[1, 2, 7, 7])],
        17,
    );
    m.opset_import
        .push(torchtrt_onnx::proto::OperatorSetIdProto {
            domain: Some("torch_tensorrt".into()),
            version: Some(1),
        });
    let net = import_model(&m, None, torchtrt::registry(), &options()).unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let xs = random_f32(2 * 30 * 45, 9);
    let out = engine
        .create_context()
        .unwrap()
        .execute(&[&Tensor::from_vec(&[1, 2, 30, 45], xs.clone()).unwrap()])
        .unwrap();
    let got = out[0].as_slice::<f32>().unwrap();
    for c in 0..2 {
        for i in 0..7usize {
            for j in 0..7usize {
                let (h0, h1) = ((i * 30) / 7, ((i + 1) * 30).div_ceil(7));
                let (w0, w1) = ((j * 45) / 7, ((j + 1) * 45).div_ceil(7));
                let mut want = f32::MIN;
                for h in h0..h1 {
                    for w in w0..w1 {
                        want = want.max(xs[c * 1350 + h * 45 + w]);
                    }
                }
                assert_eq!(got[c * 49 + i * 7 + j], want);
            }
        }
    }
}
