//! What this build of the runtime carries: with the `builtin-plugins` feature the seed
//! plugins are registered by `ttrt_runtime_create`; without it (the lean build, run with
//! `cargo test -p torchtrt-runtime --no-default-features`) none are, and an engine that
//! is not one is refused with a status and a message.

use std::ffi::{CStr, c_char};
use std::ptr::null_mut;

use torchtrt_plugin_api::abi::TTRT_OK;
use torchtrt_runtime::*;

const SEED_PLUGINS: [(&CStr, &CStr); 4] = [
    (c"torch_tensorrt", c"Interpolate"),
    (c"torch_tensorrt", c"NormalizePlugin"),
    (c"", c"InstanceNormalization_TRT"),
    (c"", c"CustomGeluPluginDynamic"),
];

fn last_error() -> String {
    // SAFETY: a NUL-terminated string owned by the library.
    unsafe { CStr::from_ptr(ttrt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn seed_plugins_are_registered_exactly_when_baked_in() {
    let baked = cfg!(feature = "builtin-plugins");
    assert_eq!(ttrt_has_builtin_plugins(), i32::from(baked));
    let mut rt = null_mut();
    // SAFETY: valid out-pointers and strings; the runtime is destroyed once.
    unsafe {
        assert_eq!(ttrt_runtime_create(&mut rt), TTRT_OK, "{}", last_error());
        for (namespace, name) in SEED_PLUGINS {
            let mut found = -1;
            let status = ttrt_runtime_has_plugin(
                rt,
                namespace.as_ptr(),
                name.as_ptr(),
                c"1".as_ptr(),
                &mut found,
            );
            assert_eq!(status, TTRT_OK, "{}", last_error());
            assert_eq!(found, i32::from(baked), "{name:?}");
        }
        ttrt_runtime_destroy(rt);
    }
}

#[test]
fn junk_is_not_an_engine() {
    let mut rt = null_mut();
    let mut engine = null_mut();
    let junk = b"torchtrt? no, just junk";
    // SAFETY: valid buffers and out-pointers; the runtime is destroyed once.
    unsafe {
        assert_eq!(ttrt_runtime_create(&mut rt), TTRT_OK);
        let status = ttrt_engine_deserialize(rt, junk.as_ptr().cast(), junk.len(), &mut engine);
        assert_eq!(status, TTRT_ERROR_INVALID_ENGINE);
        assert!(engine.is_null());
        assert!(
            last_error().starts_with("ttrt_engine_deserialize: invalid engine"),
            "{}",
            last_error()
        );
        let status = ttrt_runtime_load_library(rt, c"libtorchtrt_no_such_library.so".as_ptr());
        assert_eq!(status, TTRT_ERROR_LIBRARY);
        assert!(
            last_error().contains("libtorchtrt_no_such_library.so"),
            "{}",
            last_error()
        );
        ttrt_runtime_destroy(rt);
    }
    let version: *const c_char = ttrt_version();
    // SAFETY: a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(version) }.to_str().unwrap();
    assert_eq!(
        version,
        concat!("torchtrt-runtime ", env!("CARGO_PKG_VERSION"))
    );
}
