//! `include/torchtrt.h` and `include/torchtrt_runtime.h` agree with the Rust side: both
//! compile as strict C11, a program that takes the address of every declared function
//! links against `libtorchtrt.so`, and every structure's size, alignment and member
//! offsets, and every constant, match.

mod capi_support;

use std::collections::BTreeMap;
use std::mem::offset_of;
use std::path::PathBuf;
use std::process::Command;

use capi_support::{cc, run_ok, scratch_dir};
use torchtrt::capi::*;

macro_rules! layout {
    ($out:ident; $($t:ident { $($f:ident),* })*) => {$(
        $out.insert(stringify!($t).to_string(), size_of::<$t>().to_string());
        $out.insert(format!("{}.align", stringify!($t)), align_of::<$t>().to_string());
        $(
            $out.insert(format!("{}.{}", stringify!($t), stringify!($f)), offset_of!($t, $f).to_string());
        )*
    )*};
}

fn rust_view() -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    layout!(v;
        TtrtTensor { name, index, dtype, device, device_ordinal, nb_dims, reserved, dims, data, size }
        TtrtInputSpec { name, nb_dims, reserved, min, opt, max }
        TtrtCompileOptions { device, precision, inputs, nb_inputs, reserved }
    );
    let mut c = |name: &str, value: i64| v.insert(name.to_string(), value.to_string());
    c("TTRT_RUNTIME_API_VERSION", TTRT_RUNTIME_API_VERSION.into());
    c(
        "TTRT_ERROR_INVALID_ENGINE",
        TTRT_ERROR_INVALID_ENGINE.into(),
    );
    c(
        "TTRT_ERROR_PLUGIN_NOT_FOUND",
        TTRT_ERROR_PLUGIN_NOT_FOUND.into(),
    );
    c("TTRT_ERROR_LIBRARY", TTRT_ERROR_LIBRARY.into());
    c("TTRT_ERROR_IO", TTRT_ERROR_IO.into());
    c(
        "TTRT_ERROR_BUFFER_TOO_SMALL",
        TTRT_ERROR_BUFFER_TOO_SMALL.into(),
    );
    c("TTRT_ERROR_MODEL", TTRT_ERROR_MODEL.into());
    c("api_version()", TTRT_RUNTIME_API_VERSION.into());
    v
}

/// The `libtorchtrt.so` cargo built for these tests, next to the test binary.
fn libtorchtrt_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    assert!(
        deps.join("libtorchtrt.so").exists(),
        "cargo builds libtorchtrt.so next to the tests"
    );
    deps
}

#[test]
fn headers_declare_what_libtorchtrt_exports_with_the_rust_layouts() {
    let dir = libtorchtrt_dir();
    let exe = scratch_dir("layout").join("capi_layout");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/capi_layout.c");
    let libdir = format!("-L{}", dir.display());
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    cc(&[src], &exe, &[&libdir, "-ltorchtrt", &rpath]);
    let out = run_ok(
        Command::new(&exe).env_remove("LD_LIBRARY_PATH"),
        "capi_layout (rpath to the libtorchtrt.so of this build)",
    );
    let text = String::from_utf8(out.stdout).expect("ASCII output");
    let c_view: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(c_view, rust_view());
}

#[test]
fn runtime_header_stands_alone_and_compiles_as_strict_c11_and_cpp() {
    let dir = scratch_dir("alone");
    let src = dir.join("alone.c");
    std::fs::write(
        &src,
        "#include \"torchtrt_runtime.h\"\nint main(void) { return TTRT_RUNTIME_API_VERSION == 1u ? 0 : 1; }\n",
    )
    .unwrap();
    cc(&[src], &dir.join("alone"), &[]);
    let cpp = dir.join("both.cpp");
    std::fs::write(&cpp, "#include \"torchtrt.h\"\nint main() { return 0; }\n").unwrap();
    let include = capi_support::workspace_root().join("include");
    let mut cmd = Command::new("c++");
    cmd.args([
        "-std=c++17",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
        "-fsyntax-only",
        "-I",
    ])
    .arg(include)
    .arg(&cpp);
    run_ok(&mut cmd, "c++ -fsyntax-only torchtrt.h");
}
