//! The exported C entry point `torchtrt_extension_v1`, read back through plugin-api's host
//! side both in-process and from the built `libtorchtrt_plugins.so`: same provider, same
//! creators, and plugins created through the C tables compute what the Rust ones do.

#[path = "common/harness.rs"]
mod harness;

use std::path::PathBuf;

use torchtrt_plugin_api::abi::Extension;
use torchtrt_plugin_api::{DType, FieldCollection, PluginCreator};
use torchtrt_plugins::{PROVIDER, register};

/// Sample fields and input shapes of the three plugins of this module's concern.
fn samples() -> Vec<(&'static str, FieldCollection, Vec<i64>)> {
    vec![
        (
            "NormalizePlugin",
            FieldCollection::new()
                .with("axes", vec![0i32, -1])
                .with("order", 3.0f32),
            vec![3, 4, 5],
        ),
        (
            "InstanceNormalization_TRT",
            FieldCollection::new()
                .with("scales", vec![1.0f32, 2.0, 3.0])
                .with("bias", vec![0.0f32, 0.5, -0.5]),
            vec![2, 3, 7],
        ),
        (
            "CustomGeluPluginDynamic",
            FieldCollection::new().with("bias", vec![0.25f32; 6]),
            vec![5, 6],
        ),
    ]
}

fn check_extension(ext: &Extension) {
    assert_eq!(ext.provider(), PROVIDER);
    let theirs: Vec<String> = ext.creators().iter().map(|c| c.key().to_string()).collect();
    let ours: Vec<String> = register::creators()
        .iter()
        .map(|c| c.key().to_string())
        .collect();
    assert_eq!(theirs, ours);
    for (name, fields, shape) in samples() {
        let find = |list: Vec<std::sync::Arc<dyn PluginCreator>>| {
            list.into_iter()
                .find(|c| c.key().name == name)
                .expect("listed")
        };
        let foreign = find(ext.creators());
        let native = find(register::creators());
        assert_eq!(foreign.field_schema(), native.field_schema(), "{name}");
        let n = shape.iter().product::<i64>() as usize;
        let x = harness::values(n, 5, -2.0, 2.0);
        for dtype in [DType::F32, DType::BF16] {
            let a = harness::run(foreign.as_ref(), &fields, &shape, &x, dtype, 1).expect("runs");
            let b = harness::run(native.as_ref(), &fields, &shape, &x, dtype, 1).expect("runs");
            assert_eq!((a.shape, a.values), (b.shape, b.values), "{name} {dtype}");
        }
        let bad = FieldCollection::new().with("no_such_field", 1i32);
        let e = torchtrt_plugin_api::create_plugin(foreign.as_ref(), "l", &bad)
            .err()
            .expect("an unknown field is refused through the C tables too");
        assert!(e.to_string().contains("no_such_field"), "{e}");
    }
}

#[test]
fn in_process_entry_point_exports_every_creator() {
    // SAFETY: the entry point export_plugins! generated in this crate.
    let ext =
        unsafe { Extension::from_entry(torchtrt_plugins::torchtrt_extension_v1, "in-process") }
            .expect("readable tables");
    check_extension(&ext);
}

#[test]
fn the_shared_library_exports_every_creator() {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .expect("test binary directory");
    let path = dir.join("libtorchtrt_plugins.so");
    assert!(
        path.exists(),
        "{} is missing: cargo builds it with the crate's cdylib target",
        path.display()
    );
    let ext = Extension::load(&path).expect("libtorchtrt_plugins.so loads");
    check_extension(&ext);
}
