//! Extension libraries through the registry: a plugin written in C, compiled here with the
//! system `cc`, loaded, used in a network, run, serialized and reloaded; and the ways a
//! library can fail to load.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::{NamedCreator, backends, fresh_registry, random_f32};
use torchtrt_core::plugin_api::abi::LoadError;
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt_core::{
    BuildConfig, Dim, EngineLoader, Error, NetworkDefinition, OnDuplicate, PluginRegistry, Tensor,
    build,
};

fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../torchtrt-plugin-api/tests/c/{name}.c"))
}

/// Compiles a test C file into a shared library named `out`.
fn compile(name: &str, defines: &[&str], out: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("core-libs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join(out);
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include");
    let status = Command::new("cc")
        .args([
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-O2",
        ])
        .arg("-I")
        .arg(include)
        .args(defines)
        .arg(c_source(name))
        .arg("-o")
        .arg(&lib)
        .arg("-lm")
        .status()
        .expect("the system C compiler runs");
    assert!(status.success(), "cc failed on {name}.c");
    lib
}

/// Deserializes `bytes` with `registry` and checks that it gives `out` for `input`.
fn assert_reload_runs_the_same(
    bytes: &[u8],
    registry: &'static PluginRegistry,
    input: &Tensor,
    out: &[Tensor],
) {
    let reloaded = EngineLoader::with_registry(backends(), registry)
        .deserialize(bytes)
        .unwrap();
    let again = reloaded
        .create_context()
        .unwrap()
        .execute(&[input])
        .unwrap();
    assert_eq!(again, out);
}

fn key() -> PluginKey {
    PluginKey::new("test_c", "ScaleShift", "1")
}

#[test]
fn c_plugin_loads_builds_runs_and_reloads() {
    let lib = compile("scale_shift", &[], "libscale_shift_a.so");
    let registry = fresh_registry();
    let info = registry.load_library(&lib).unwrap();
    assert_eq!(info.provider, "scale_shift_c 1.0");
    assert_eq!(info.registered, vec![key()]);
    let listed = registry.creators();
    assert_eq!(
        listed[0].library.as_deref(),
        Some(std::fs::canonicalize(&lib).unwrap().as_path())
    );
    assert_eq!(listed[0].fields.len(), 3);

    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), Dim::Fixed(5)],
        )
        .unwrap();
    let fields = FieldCollection::new()
        .with("scale", 3.0f32)
        .with("shift", -1.0f32)
        .with("repeat", 2i32);
    let y = net
        .add_plugin("ss", registry, &key(), &fields, &[x])
        .unwrap();
    net.mark_output(y[0], "y").unwrap();
    let engine = build(&net, &BuildConfig::default(), &backends()).unwrap();
    let summary = engine.summary().to_string();
    assert!(summary.contains("libscale_shift_a.so"), "{summary}");

    let xs = random_f32(15, 11);
    let input = Tensor::from_vec(&[3, 5], xs.clone()).unwrap();
    let out = engine.create_context().unwrap().execute(&[&input]).unwrap();
    assert_eq!(out[0].shape(), &[3, 10]);
    let got = out[0].as_slice::<f32>().unwrap();
    for r in 0..3 {
        for c in 0..10 {
            let want = 3.0 * xs[r * 5 + c % 5] - 1.0;
            assert!(
                (got[r * 10 + c] - want).abs() < 1e-6,
                "({r},{c}) {} vs {want}",
                got[r * 10 + c]
            );
        }
    }

    let bytes = engine.serialize();
    assert_reload_runs_the_same(&bytes, registry, &input, &out);

    let elsewhere = EngineLoader::with_registry(backends(), fresh_registry());
    match elsewhere.deserialize(&bytes).err().unwrap() {
        Error::PluginNotFound { name, library, .. } => {
            assert_eq!(name, "ScaleShift");
            assert!(library.unwrap().ends_with("libscale_shift_a.so"));
        }
        other => panic!("expected PluginNotFound, got {other}"),
    }

    registry.unload_library(&lib).unwrap();
    assert!(registry.get(&key()).is_none());
    assert!(
        engine.create_context().unwrap().execute(&[&input]).is_ok(),
        "plugins created before unload keep the library mapped"
    );
    assert!(registry.unload_library(&lib).is_err());
}

/// `ScaleShift` compiled with `IN_PLACE`: its output aliases its input (ABI version 4) and
/// its kernel reads only the output.
fn in_place_net(registry: &'static PluginRegistry) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), Dim::Fixed(6)],
        )
        .unwrap();
    let mut ss = |name: &str, scale: f32, shift: f32, input| {
        let fields = FieldCollection::new()
            .with("scale", scale)
            .with("shift", shift);
        net.add_plugin(name, registry, &key(), &fields, &[input])
            .unwrap()[0]
    };
    let a = ss("a", 3.0, -1.0, x);
    let b = ss("b", 0.5, 2.0, x);
    let c = ss("c", 2.0, 1.0, a);
    net.mark_output(a, "a").unwrap();
    net.mark_output(b, "b").unwrap();
    net.mark_output(c, "c").unwrap();
    net
}

#[test]
fn c_plugin_output_aliases_its_input_and_other_readers_see_the_input() {
    let lib = compile("scale_shift", &["-DIN_PLACE"], "libscale_shift_in_place.so");
    let registry = fresh_registry();
    registry.load_library(&lib).unwrap();
    let creator = registry.get(&key()).unwrap();
    assert!(creator.capabilities().aliased_outputs);

    let engine = build(
        &in_place_net(registry),
        &BuildConfig::default(),
        &backends(),
    )
    .unwrap();
    let xs = random_f32(18, 5);
    let input = Tensor::from_vec(&[3, 6], xs.clone()).unwrap();
    let out = engine.create_context().unwrap().execute(&[&input]).unwrap();
    let want = |f: &dyn Fn(f32) -> f32| xs.iter().map(|&v| f(v)).collect::<Vec<f32>>();
    let expected = [
        want(&|v| 3.0 * v - 1.0),
        want(&|v| 0.5 * v + 2.0),
        want(&|v| 2.0 * (3.0 * v - 1.0) + 1.0),
    ];
    for (name, (got, want)) in ["a", "b", "c"].iter().zip(out.iter().zip(&expected)) {
        let got = got.as_slice::<f32>().unwrap();
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() < 1e-5, "{name}[{i}]: {g} vs {w}");
        }
    }
    assert_eq!(input.as_slice::<f32>().unwrap(), xs.as_slice());

    assert_reload_runs_the_same(&engine.serialize(), registry, &input, &out);

    let fields = FieldCollection::new()
        .with("scale", 1.0f32)
        .with("repeat", 2i32);
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F32, &[Dim::Fixed(4)]).unwrap();
    let err = net
        .add_plugin("tiled", registry, &key(), &fields, &[x])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("repeat must be 1"), "{err}");
}

#[test]
fn version_3_library_cannot_declare_an_alias() {
    let lib = compile(
        "scale_shift",
        &["-DIN_PLACE", "-DABI_VERSION=3"],
        "libscale_shift_v3.so",
    );
    let registry = fresh_registry();
    assert_eq!(registry.load_library(&lib).unwrap().registered, vec![key()]);
    let creator = registry.get(&key()).unwrap();
    assert!(
        !creator.capabilities().aliased_outputs,
        "a version-3 library's bit 8 means nothing"
    );
    let fields = FieldCollection::new().with("scale", 1.0f32);
    let plugin = torchtrt_core::plugin_api::create_plugin(creator.as_ref(), "p", &fields).unwrap();
    assert_eq!(
        plugin.aliased_input(0),
        None,
        "a version-3 table ends at `set_tactic`"
    );
}

#[test]
fn same_provider_again_is_a_no_op() {
    let a = compile("scale_shift", &[], "libscale_shift_b.so");
    let b = compile("scale_shift", &[], "libscale_shift_copy.so");
    let registry = fresh_registry();
    registry.load_library(&a).unwrap();
    let again = registry.load_library(&a).unwrap();
    assert!(again.registered.is_empty());
    let copy = registry.load_library(&b).unwrap();
    assert!(
        copy.registered.is_empty(),
        "same provider, same keys: nothing new"
    );
    assert_eq!(registry.len(), 1);
}

#[test]
fn key_clash_refuses_the_library_and_leaves_the_registry_unchanged() {
    let lib = compile("scale_shift", &[], "libscale_shift_c.so");
    let registry = PluginRegistry::new();
    registry
        .register(
            Arc::new(NamedCreator(key())),
            "someone else",
            OnDuplicate::Error,
        )
        .unwrap();
    let before: Vec<String> = registry
        .creators()
        .iter()
        .map(|c| format!("{} {}", c.key, c.provider))
        .collect();
    let err = registry.load_library(&lib).unwrap_err().to_string();
    assert!(
        err.contains("test_c::ScaleShift@1") && err.contains("someone else"),
        "{err}"
    );
    let after: Vec<String> = registry
        .creators()
        .iter()
        .map(|c| format!("{} {}", c.key, c.provider))
        .collect();
    assert_eq!(before, after);
    assert!(registry.libraries().is_empty());
}

#[test]
fn bad_libraries_are_clear_errors() {
    let registry = PluginRegistry::new();
    let missing = registry
        .load_library("/nonexistent/libnothing.so")
        .unwrap_err();
    assert!(
        matches!(missing, Error::Load(LoadError::NotFound { .. })),
        "{missing}"
    );

    let plain = compile("not_extension", &[], "libplain.so");
    let err = registry.load_library(&plain).unwrap_err();
    assert!(
        matches!(err, Error::Load(LoadError::NotAnExtension { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("torchtrt_extension_v1"), "{err}");

    let future = compile("malformed", &["-DABI_VERSION=999"], "libfuture.so");
    let err = registry.load_library(&future).unwrap_err();
    assert!(
        matches!(err, Error::Load(LoadError::AbiVersion { found: 999, .. })),
        "{err}"
    );

    let text = std::env::temp_dir().join(format!("not-a-library-{}.so", std::process::id()));
    std::fs::write(&text, b"hello").unwrap();
    let err = registry.load_library(&text).unwrap_err();
    assert!(
        matches!(err, Error::Load(LoadError::NotLoadable { .. })),
        "{err}"
    );
    assert!(registry.is_empty());
}
