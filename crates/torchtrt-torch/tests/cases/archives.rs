//! Archives the reader must refuse with an error naming what and where (never a panic or an
//! unbounded allocation), programs with ops nothing converts (one error listing all of
//! them), and an op reached through the plugin fallback by namespace and name.

use std::io::{Cursor, Read, Write};

use torchtrt::torch::{ImportOptions, TorchError, load_program_bytes};
use torchtrt::{BuildConfig, Tensor};

use super::data::{read_npy, relative_error, root};

/// The records of a generated archive.
fn records(program: &str, form: &str) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(root().join(program).join(format!("{form}.pt2"))).unwrap();
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..zip.len())
        .map(|i| {
            let mut f = zip.by_index(i).unwrap();
            let mut data = Vec::new();
            f.read_to_end(&mut data).unwrap();
            (f.name().to_string(), data)
        })
        .collect()
}

fn write_zip(records: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in records {
        out.start_file(name.as_str(), options).unwrap();
        out.write_all(data).unwrap();
    }
    out.finish().unwrap().into_inner()
}

/// A generated archive with its program JSON passed through `edit`.
fn edited(program: &str, form: &str, edit: impl Fn(&mut serde_json::Value)) -> Vec<u8> {
    let mut recs = records(program, form);
    for (name, data) in &mut recs {
        if name.ends_with("models/model.json") {
            let mut v: serde_json::Value = serde_json::from_slice(data).unwrap();
            edit(&mut v);
            *data = serde_json::to_vec(&v).unwrap();
        }
    }
    write_zip(&recs)
}

fn error_of(bytes: &[u8]) -> String {
    match load_program_bytes(bytes, "test.pt2") {
        Ok(p) => match torchtrt::import_program(&p, ImportOptions::default()) {
            Ok(_) => panic!("the program was accepted"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

#[test]
fn not_a_zip() {
    let e = error_of(b"definitely not an archive");
    assert!(
        e.contains("test.pt2") && e.contains("not a zip archive"),
        "{e}"
    );
}

#[test]
fn legacy_archive_is_refused_with_the_way_out() {
    let bytes = write_zip(&[
        ("m/serialized_exported_program.json".into(), b"{}".to_vec()),
        ("m/serialized_state_dict.pt".into(), vec![0; 16]),
    ]);
    let e = error_of(&bytes);
    assert!(
        e.contains("legacy") && e.contains("torch.export.load"),
        "{e}"
    );
}

#[test]
fn zip_without_a_program() {
    let bytes = write_zip(&[("m/data/x".into(), vec![1, 2, 3])]);
    let e = error_of(&bytes);
    assert!(e.contains("models/<name>.json"), "{e}");
}

#[test]
fn schema_major_mismatch_names_both_versions() {
    let bytes = edited("plugin_gelu", "exported", |v| {
        v["schema_version"]["major"] = 7.into();
        v["schema_version"]["minor"] = 3.into();
    });
    let e = error_of(&bytes);
    assert!(e.contains("7.3") && e.contains("8.x"), "{e}");
}

#[test]
fn record_larger_than_the_archive_is_refused_before_allocating() {
    let mut bytes = write_zip(&records("plugin_gelu", "exported"));
    let sig = b"PK\x01\x02";
    let mut patched = 0;
    let mut i = 0;
    while let Some(k) = bytes[i..].windows(4).position(|w| w == sig) {
        let at = i + k;
        let name_len = u16::from_le_bytes([bytes[at + 28], bytes[at + 29]]) as usize;
        let name = String::from_utf8_lossy(&bytes[at + 46..at + 46 + name_len]).into_owned();
        if name.ends_with("models/model.json") {
            bytes[at + 24..at + 28].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
            patched += 1;
        }
        i = at + 4;
    }
    assert_eq!(patched, 1);
    let e = error_of(&bytes);
    assert!(e.contains("model.json"), "{e}");
}

#[test]
fn truncated_archive() {
    let bytes = write_zip(&records("plugin_gelu", "exported"));
    for cut in [10, bytes.len() / 2, bytes.len() - 30] {
        let e = error_of(&bytes[..cut]);
        assert!(e.contains("test.pt2"), "cut at {cut}: {e}");
    }
}

#[test]
fn weight_view_outside_its_storage_names_the_parameter() {
    let mut recs = records("plugin_gelu", "exported");
    for (name, data) in &mut recs {
        if name.ends_with("model_weights_config.json") {
            let mut v: serde_json::Value = serde_json::from_slice(data).unwrap();
            v["config"]["lin.weight"]["tensor_meta"]["storage_offset"] =
                serde_json::json!({"as_int": 5});
            *data = serde_json::to_vec(&v).unwrap();
        }
    }
    let e = error_of(&write_zip(&recs));
    assert!(
        e.contains("lin.weight") && e.contains("storage holds"),
        "{e}"
    );
}

#[test]
fn every_unsupported_op_is_listed_with_the_flags() {
    let bytes = edited("bert_tiny", "exported", |v| {
        let nodes = v["graph_module"]["graph"]["nodes"].as_array_mut().unwrap();
        let mut renamed = 0;
        for n in nodes.iter_mut() {
            let t = n["target"].as_str().unwrap().to_string();
            if t == "torch.ops.aten.gelu.default" {
                n["target"] = "torch.ops.mylib.fancy_gelu.default".into();
                renamed += 1;
            } else if t == "torch.ops.aten.tanh.default" {
                n["target"] = "torch.ops.mylib.fancy_tanh.default".into();
                renamed += 1;
            }
        }
        assert!(renamed >= 3);
    });
    let p = load_program_bytes(&bytes, "test.pt2").unwrap();
    let e = torchtrt::import_program(&p, ImportOptions::default()).unwrap_err();
    let TorchError::Unsupported(ops) = &e else {
        panic!("{e}")
    };
    let names: Vec<&str> = ops.iter().map(|o| o.op.as_str()).collect();
    assert_eq!(
        names,
        ["mylib::fancy_gelu.default", "mylib::fancy_tanh.default"]
    );
    assert_eq!(ops[0].count, 2);
    let text = e.to_string();
    for want in [
        "--custom-converters",
        "--custom-torch-ops",
        "--plugins",
        "mylib::fancy_gelu@1",
    ] {
        assert!(text.contains(want), "{want} missing: {text}");
    }
}

#[test]
fn unknown_argument_kinds_and_node_targets_are_named() {
    let bytes = edited("plugin_gelu", "exported", |v| {
        let nodes = v["graph_module"]["graph"]["nodes"].as_array_mut().unwrap();
        let n = nodes
            .iter_mut()
            .find(|n| n["target"] == "torch.ops.aten.gelu.default")
            .unwrap();
        n["inputs"][0]["arg"] = serde_json::json!({"as_graph": {"name": "g", "graph": {}}});
    });
    let e = error_of(&bytes);
    assert!(e.contains("as_graph") && e.contains("gelu"), "{e}");
}

/// `upsample_nearest2d` rewritten as `torch_tensorrt::Interpolate(self, mode, scales,
/// use_scales)`: no converter knows it, so it reaches the plugin of that namespace and
/// name, its arguments becoming fields, and computes what PyTorch's op did.
#[test]
fn op_of_a_plugin_namespace_reaches_the_plugin_with_arguments_as_fields() {
    let bytes = edited("plugin_interpolate", "exported", |v| {
        let nodes = v["graph_module"]["graph"]["nodes"].as_array_mut().unwrap();
        let n = nodes
            .iter_mut()
            .find(|n| n["target"] == "torch.ops.aten.upsample_nearest2d.vec")
            .unwrap();
        let x = n["inputs"][0]["arg"].clone();
        n["target"] = "torch.ops.torch_tensorrt.Interpolate.default".into();
        n["inputs"] = serde_json::json!([
            {"name": "self", "arg": x},
            {"name": "mode", "arg": {"as_string": "nearest"}},
            {"name": "scales", "arg": {"as_floats": [2.0, 2.0]}},
            {"name": "use_scales", "arg": {"as_int": 1}},
        ]);
    });
    let p = load_program_bytes(&bytes, "test.pt2").unwrap();
    let net = torchtrt::import_program(&p, ImportOptions::default()).unwrap();
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), "cpu").unwrap();
    let dir = root().join("plugin_interpolate").join("case1");
    let x = read_npy(&dir.join("inputs/x.npy"));
    let outs = engine
        .create_context()
        .unwrap()
        .execute_named(&[("x", &x)])
        .unwrap();
    let got: &Tensor = &outs
        .iter()
        .find(|(n, _)| n == "upsample_nearest2d")
        .unwrap()
        .1;
    let want = read_npy(&dir.join("outputs/upsample_nearest2d.npy"));
    assert_eq!(relative_error(got, &want), 0.0);
}
