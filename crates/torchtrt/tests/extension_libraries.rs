//! Custom-converter and custom-op libraries end to end: the examples under `examples/` built
//! as real `cdylib`s, loaded with `torchtrt::load_extensions`, and models using their ops
//! imported, compiled, serialized, reloaded and run against plain references.

mod common;
mod extension_support;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::examples::build_example;
use common::{assert_close, random_f32};
use extension_support::{compile, float, one_node_model, run};
use torchtrt::plugin_api::PluginKey;
use torchtrt::{LoadOptions, Runtime, registry};

fn converter_library() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = build_example("converter_rust", "torchtrt_example_converter_rust");
        torchtrt::load_extensions(&lib, &LoadOptions::default())
            .expect("the converter example loads");
        lib
    })
}

fn custom_op_library() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = build_example("custom_op_rust", "torchtrt_example_custom_op_rust");
        torchtrt::load_extensions(&lib, &LoadOptions::default())
            .expect("the custom-op example loads");
        lib
    })
}

fn hard_swish(x: f32, alpha: f32) -> f32 {
    alpha * x * (x + 3.0).clamp(0.0, 6.0) / 6.0
}

fn gelu_tanh(x: f32) -> f32 {
    let c = (2.0f32 / std::f32::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

#[test]
fn converter_maps_fused_scale_bias_onto_core_layers() {
    converter_library();
    let model = one_node_model(
        "fsb",
        "com.example",
        "FusedScaleBias",
        vec![float("scale", 1.5), float("bias", -0.25)],
    );
    let engine = compile(&model).unwrap();
    assert!(engine.summary().plugins.is_empty(), "core layers only");
    for (n, seed) in [(3usize, 1u64), (7, 2)] {
        let x = random_f32(n * 8, seed);
        let want: Vec<f32> = x.iter().map(|&v| v * 1.5 - 0.25).collect();
        assert_close(&run(&engine, &x).unwrap(), &want, 1e-6, 1e-6);
    }
}

#[test]
fn converter_emits_a_plugin_layer() {
    converter_library();
    let model = one_node_model("fast_gelu", "com.example", "FastGelu", Vec::new());
    let engine = compile(&model).unwrap();
    let summary = engine.summary().to_string();
    assert!(summary.contains("CustomGeluPluginDynamic"), "{summary}");
    let engine = Runtime::new()
        .unwrap()
        .deserialize(&engine.serialize())
        .unwrap();
    let x: Vec<f32> = random_f32(5 * 8, 3).iter().map(|v| v * 4.0).collect();
    let want: Vec<f32> = x.iter().map(|&v| gelu_tanh(v)).collect();
    assert_close(&run(&engine, &x).unwrap(), &want, 1e-5, 1e-4);
}

#[test]
fn converter_error_names_the_node_and_the_library() {
    converter_library();
    let model = one_node_model(
        "fsb_without_scale",
        "com.example",
        "FusedScaleBias",
        Vec::new(),
    );
    let e = compile(&model).err().expect("the import fails");
    assert!(e.contains("fsb_without_scale"), "{e}");
    assert!(e.contains("attribute `scale` (float) is required"), "{e}");
    assert!(e.contains("torchtrt_example_converter_rust"), "{e}");
}

#[test]
fn converter_panic_is_caught_at_the_boundary() {
    converter_library();
    let model = one_node_model("boom", "com.example", "Panic", Vec::new());
    let e = compile(&model).err().expect("the import fails");
    assert!(e.contains("boom") && e.contains("panicked"), "{e}");
}

#[test]
fn loading_the_same_library_twice_adds_nothing() {
    let lib = converter_library();
    let canonical = lib.canonicalize().unwrap();
    let mine = || {
        torchtrt::onnx::extension_ops()
            .iter()
            .filter(|o| o.library == canonical)
            .count()
    };
    assert_eq!(mine(), 3);
    let info = torchtrt::load_extensions(lib, &LoadOptions::default()).unwrap();
    assert!(info.converters.is_empty() && info.plugins.is_empty());
    assert_eq!(mine(), 3);
}

#[test]
fn custom_op_compiles_and_runs_with_nothing_else() {
    let lib = custom_op_library();
    let key = PluginKey::new("com.example", "HardSwishCustom", "1");
    let entry = registry()
        .entry(&key)
        .expect("the derived plugin is registered");
    assert_eq!(
        entry.library.as_deref(),
        Some(lib.canonicalize().unwrap().as_path())
    );
    let names: Vec<String> = entry
        .creator
        .field_schema()
        .iter()
        .map(|f| f.name.clone())
        .collect();
    assert_eq!(names, ["alpha", "max_abs"]);
    let model = one_node_model(
        "hs",
        "com.example",
        "HardSwishCustom",
        vec![float("alpha", 0.5)],
    );
    let engine = compile(&model).unwrap();
    let summary = engine.summary().to_string();
    assert!(
        summary.contains("libtorchtrt_example_custom_op_rust.so"),
        "{summary}"
    );
    let engine = Runtime::new()
        .unwrap()
        .deserialize(&engine.serialize())
        .unwrap();
    for (n, seed) in [(2usize, 4u64), (9, 5)] {
        let x: Vec<f32> = random_f32(n * 8, seed).iter().map(|v| v * 5.0).collect();
        let want: Vec<f32> = x.iter().map(|&v| hard_swish(v, 0.5)).collect();
        assert_close(&run(&engine, &x).unwrap(), &want, 1e-6, 1e-6);
    }
}

#[test]
fn custom_op_kernel_error_reaches_the_caller() {
    custom_op_library();
    let model = one_node_model(
        "hs_limited",
        "com.example",
        "HardSwishCustom",
        vec![float("max_abs", 0.5)],
    );
    let engine = compile(&model).unwrap();
    let mut x = vec![0.25f32; 16];
    x[11] = 0.75;
    let e = run(&engine, &x).unwrap_err();
    assert!(
        e.contains("input element 11 is 0.75, beyond max_abs 0.5"),
        "{e}"
    );
    assert_close(
        &run(&engine, &[0.25f32; 8]).unwrap(),
        &[hard_swish(0.25, 1.0); 8],
        1e-6,
        1e-6,
    );
}

#[test]
fn a_missing_library_is_an_error_naming_it() {
    let e = torchtrt::load_extensions("/nonexistent/libnothing.so", &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/libnothing.so"), "{e}");
}
