//! Deploying an engine that uses a custom op: it records the derived plugin and its library,
//! deserializing it without the library fails naming both, and loading the library the way a
//! runtime does (plugins only) makes it run. (Its own test binary: it unloads the library.)

mod common;
mod extension_support;

use common::examples::build_example;
use common::{assert_close, random_f32};
use extension_support::{compile, float, one_node_model, run};
use torchtrt::{Error, LoadOptions, Runtime, registry};

#[test]
fn an_engine_with_a_custom_op_needs_its_library_at_run_time() {
    let lib = build_example("custom_op_rust", "torchtrt_example_custom_op_rust");
    torchtrt::load_extensions(&lib, &LoadOptions::default()).unwrap();
    let model = one_node_model(
        "hs",
        "com.example",
        "HardSwishCustom",
        vec![float("alpha", 2.0)],
    );
    let bytes = compile(&model).unwrap().serialize();

    registry().unload_library(&lib).unwrap();
    let runtime = Runtime::new().unwrap();
    let e = runtime
        .deserialize(&bytes)
        .err()
        .expect("the plugin is missing");
    let text = e.to_string();
    match e {
        Error::PluginNotFound {
            namespace,
            name,
            library: Some(library),
            ..
        } => {
            assert_eq!(
                (namespace.as_str(), name.as_str()),
                ("com.example", "HardSwishCustom")
            );
            assert!(
                library.ends_with("libtorchtrt_example_custom_op_rust.so"),
                "{library}"
            );
        }
        other => panic!("expected PluginNotFound with the library, got {other}"),
    }
    assert!(
        text.contains("libtorchtrt_example_custom_op_rust.so"),
        "{text}"
    );

    runtime.load_plugins(&lib).unwrap();
    let engine = runtime.deserialize(&bytes).unwrap();
    let x: Vec<f32> = random_f32(3 * 8, 21).iter().map(|v| v * 4.0).collect();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| 2.0 * v * (v + 3.0).clamp(0.0, 6.0) / 6.0)
        .collect();
    assert_close(&run(&engine, &x).unwrap(), &want, 1e-6, 1e-6);
}
