//! Failures coming from C libraries become errors naming the library or the plugin: errors
//! a plugin reports, values it must not return, and libraries that cannot be loaded.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::{Arc, OnceLock};

use common::{Buffer, run_cpu};
use torchtrt_plugin_api::abi::{Extension, LoadError, TTRT_ABI_VERSION};
use torchtrt_plugin_api::{
    DType, DimExpr, FieldCollection, Plugin, PluginCreator, PluginError, TensorDesc, create_plugin,
};

fn failing() -> Arc<dyn PluginCreator> {
    static EXT: OnceLock<Extension> = OnceLock::new();
    EXT.get_or_init(|| Extension::load(common::shared_library("failing", &[])).expect("loads"))
        .creators()
        .remove(0)
}

fn plugin(fail_in: &str) -> Result<Box<dyn Plugin>, PluginError> {
    create_plugin(
        failing().as_ref(),
        "the_layer",
        &FieldCollection::new().with("fail_in", fail_in),
    )
}

fn run(p: &dyn Plugin) -> Result<Vec<Buffer>, PluginError> {
    let desc = TensorDesc::new(DType::F32, vec![2]);
    let x = Buffer::from_values(&[0.5f32, -1.5]);
    run_cpu(p, &[(desc.clone(), x)], &[desc])
}

#[test]
fn create_error_carries_the_plugins_message() {
    let Err(PluginError::InvalidInput(msg)) = plugin("create") else {
        panic!("create must fail");
    };
    assert_eq!(
        msg,
        "plugin test_c::Failing@1 layer `the_layer`: Failing: refused to create"
    );
}

#[test]
fn enqueue_error_carries_the_plugins_message() {
    let p = plugin("enqueue").expect("created");
    let Err(PluginError::Execution(msg)) = run(p.as_ref()) else {
        panic!("enqueue must fail");
    };
    assert!(msg.ends_with("Failing: the kernel exploded"), "{msg}");
    assert!(run(plugin("none").expect("created").as_ref()).is_ok());
}

#[test]
fn failed_clone_reports_its_error_later() {
    let p = plugin("clone").expect("created");
    let copy = p.clone_plugin();
    assert_eq!(copy.fields_to_serialize(), p.fields_to_serialize());
    assert_eq!(copy.num_outputs(), 1);
    let err = run(copy.as_ref())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("Failing: cannot clone"), "{err}");
}

#[test]
fn unknown_dtype_and_bad_handles_are_refused() {
    let p = plugin("dtype").expect("created");
    let err = p
        .output_dtypes(&[DType::F32])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("output 0 has unknown dtype 99"), "{err}");
    let p = plugin("shape").expect("created");
    let err = p
        .output_shapes(&[vec![DimExpr::sym("n")]])
        .err()
        .map(|e| e.to_string());
    assert!(
        err.unwrap_or_default()
            .contains("invalid dimension handle 12345")
    );
}

fn load_error(path: &std::path::Path) -> LoadError {
    match Extension::load(path) {
        Ok(ext) => panic!("{} loaded as {ext:?}", path.display()),
        Err(e) => e,
    }
}

#[test]
fn a_missing_file_is_named() {
    let path = common::scratch_dir().join("libdoes_not_exist.so");
    let e = load_error(&path);
    assert!(matches!(&e, LoadError::NotFound { path: p } if *p == path));
    assert!(e.to_string().contains("libdoes_not_exist.so"));
}

#[test]
fn a_file_that_is_not_elf_is_refused_before_the_loader() {
    let path = common::c_source("not_extension");
    let e = load_error(&path);
    let LoadError::NotLoadable { reason, .. } = &e else {
        panic!("expected NotLoadable, got {e}");
    };
    assert_eq!(reason, "not an ELF file");
    assert!(e.to_string().contains("not_extension.c"), "{e}");
    let e = load_error(&common::scratch_dir());
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

#[test]
fn a_truncated_library_is_refused_before_the_loader() {
    let lib = std::fs::read(common::shared_library("not_extension", &[])).unwrap();
    assert!(lib.len() > 4096, "{} bytes", lib.len());
    let mut cuts: Vec<usize> = vec![3, 20, 63, 64, 100, 1000];
    cuts.extend((1..16).map(|k| lib.len() * k / 16));
    cuts.push(lib.len() - 1);
    for cut in cuts {
        let path = common::scratch_dir().join(format!("libtruncated_{cut}.so"));
        std::fs::write(&path, &lib[..cut]).unwrap();
        let e = load_error(&path);
        assert!(
            matches!(e, LoadError::NotLoadable { .. }),
            "cut at {cut}: {e}"
        );
    }
}

#[test]
fn a_library_of_another_machine_or_class_is_refused() {
    let lib = std::fs::read(common::shared_library("not_extension", &[])).unwrap();
    let cases: [(usize, &[u8], &str); 4] = [
        (4, &[1], "ELF class 1"),
        (5, &[2], "big-endian"),
        (16, &[2, 0], "not a shared object"),
        (18, &[40, 0], "ELF machine 40"),
    ];
    for (at, bytes, needle) in cases {
        let mut copy = lib.clone();
        copy[at..at + bytes.len()].copy_from_slice(bytes);
        let path = common::scratch_dir().join(format!("libpatched_{at}.so"));
        std::fs::write(&path, &copy).unwrap();
        let e = load_error(&path).to_string();
        assert!(e.contains(needle), "{e}");
    }
}

#[test]
fn a_path_that_cannot_be_read_is_not_called_missing() {
    let file = common::c_source("not_extension");
    let path = file.join("libinside_a_file.so");
    let e = load_error(&path);
    assert!(matches!(e, LoadError::Unreadable { .. }), "{e}");
    assert!(e.to_string().contains("cannot read plugin library"), "{e}");
}

#[test]
fn a_library_without_the_entry_point_is_not_an_extension() {
    let e = load_error(&common::shared_library("not_extension", &[]));
    assert!(matches!(e, LoadError::NotAnExtension { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains("libnot_extension_.so") && msg.contains("not a torchtrt extension"),
        "{msg}"
    );
}

#[test]
fn another_abi_version_is_refused() {
    let e = load_error(&common::shared_library("malformed", &["-DABI_VERSION=999"]));
    assert!(
        matches!(
            e,
            LoadError::AbiVersion {
                found: 999,
                expected: TTRT_ABI_VERSION,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("ABI version 999"));
    let e = load_error(&common::shared_library("malformed", &["-DABI_VERSION=0"]));
    assert!(matches!(e, LoadError::AbiVersion { found: 0, .. }), "{e}");
}

#[test]
fn version_1_libraries_still_load() {
    let v1 = Extension::load(common::shared_library("malformed", &["-DABI_VERSION=1"]))
        .expect("a version-1 library loads");
    assert_eq!(v1.creators().len(), 1);
}

#[test]
fn malformed_tables_are_refused_with_a_reason() {
    let ok = Extension::load(common::shared_library("malformed", &[])).expect("control case loads");
    assert_eq!(ok.creators().len(), 1);
    for (case, reason) in [
        ("-DCASE_NULL_EXTENSION", "returned NULL"),
        ("-DCASE_BAD_UTF8", "provider is not valid UTF-8"),
        ("-DCASE_NULL_CREATORS", "creators is NULL"),
        ("-DCASE_NULL_NAME", "creator 0: name is NULL"),
        ("-DCASE_NULL_CREATE", "`create` is NULL"),
        (
            "-DCASE_BAD_FIELD_TYPE",
            "schema field `x`: unknown field type 99",
        ),
        (
            "-DCASE_DUPLICATE_KEY",
            "test_c::Malformed@1 is provided twice",
        ),
    ] {
        let e = load_error(&common::shared_library("malformed", &[case]));
        assert!(matches!(e, LoadError::Malformed { .. }), "{case}: {e}");
        assert!(e.to_string().contains(reason), "{case}: {e}");
    }
}
