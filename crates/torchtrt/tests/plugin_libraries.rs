//! Plugin libraries in a full host: the out-of-tree Rust example built as a real `cdylib`
//! and loaded through the registry, and `libtorchtrt_plugins.so` loaded into a process that
//! already has the built-ins baked in.

mod common;

use std::path::PathBuf;

use common::examples::build_example;
use common::{assert_close, random_f32};
use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, Runtime, Tensor, registry};

/// The out-of-tree Rust plugin example as a built `.so`.
fn build_swish() -> PathBuf {
    build_example("plugin_rust", "torchtrt_example_plugin_rust")
}

#[test]
fn rust_cdylib_plugin_runs_in_an_engine() {
    let runtime = Runtime::new().unwrap();
    let lib = build_swish();
    let info = runtime.load_plugins(&lib).unwrap();
    assert_eq!(info.provider, "torchtrt_example_plugin_rust 0.1.0");
    let key = PluginKey::new("example", "Swish", "1");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::dynamic("n", 1, 8, 64)])
        .unwrap();
    let fields = FieldCollection::new().with("beta", 1.5f32);
    let y = net
        .add_plugin("swish", registry(), &key, &fields, &[x])
        .unwrap();
    net.mark_output(y[0], "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let summary = engine.summary().to_string();
    assert!(
        summary.contains("libtorchtrt_example_plugin_rust.so"),
        "{summary}"
    );
    let reloaded = runtime.deserialize(&engine.serialize()).unwrap();
    let xs = random_f32(40, 7);
    let want: Vec<f32> = xs.iter().map(|&v| v / (1.0 + (-1.5 * v).exp())).collect();
    let input = Tensor::from_vec(&[40], xs).unwrap();
    let out = reloaded
        .create_context()
        .unwrap()
        .execute(&[&input])
        .unwrap();
    assert_close(out[0].as_slice::<f32>().unwrap(), &want, 1e-6, 1e-5);
}

#[test]
fn plugin_library_so_is_a_no_op_next_to_the_baked_in_builtins() {
    torchtrt::init_plugins().unwrap();
    let before = registry().len();
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let so = [
        deps.join("libtorchtrt_plugins.so"),
        deps.join("../libtorchtrt_plugins.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("cargo builds libtorchtrt_plugins.so next to the tests");
    let info = registry().load_library(&so).unwrap();
    assert_eq!(info.provider, torchtrt_plugins_provider());
    assert!(
        info.registered.is_empty(),
        "same provider: nothing registered twice"
    );
    assert_eq!(registry().len(), before);
    torchtrt::init_plugins().unwrap();
    assert_eq!(registry().len(), before);
}

fn torchtrt_plugins_provider() -> String {
    format!("torchtrt_plugins {}", env!("CARGO_PKG_VERSION"))
}
