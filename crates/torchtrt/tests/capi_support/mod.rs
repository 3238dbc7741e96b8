//! Shared by the C API tests: the seed-plugin ONNX model, the C compiler, and the
//! `libtorchtrt_runtime.so` builds (default and lean), each made by its own cargo.

#![allow(dead_code, reason = "each test binary uses its own subset")]

pub mod onnx_model;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// A host f32 `TtrtTensor` over `data`, bound by `name` (or by `index` when `name` is None);
/// empty `dims` leaves the shape for the runtime to fill in (outputs).
pub fn host_tensor(
    name: Option<&std::ffi::CStr>,
    index: i32,
    dims: &[i64],
    data: &mut [f32],
) -> torchtrt::capi::TtrtTensor {
    use torchtrt::plugin_api::abi::TTRT_MAX_DIMS;
    let mut t = torchtrt::capi::TtrtTensor {
        name: name.map_or(std::ptr::null(), std::ffi::CStr::as_ptr),
        index,
        dtype: torchtrt::plugin_api::DType::F32 as i32,
        device: 0,
        device_ordinal: 0,
        nb_dims: dims.len() as i32,
        reserved: 0,
        dims: [0; TTRT_MAX_DIMS],
        data: data.as_mut_ptr().cast(),
        size: std::mem::size_of_val(data),
    };
    t.dims[..dims.len()].copy_from_slice(dims);
    t
}

/// The flags every C file must compile cleanly with.
pub const STRICT_C: [&str; 5] = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace exists")
}

/// A per-process scratch folder under the target directory.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("capi-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder can be created");
    dir
}

/// Runs `cmd`, panicking with its stderr when it fails.
pub fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiles C `sources` with the strict flags and `include/` into `out`.
pub fn cc(sources: &[PathBuf], out: &Path, extra: &[&str]) {
    let mut cmd = Command::new("cc");
    cmd.args(STRICT_C)
        .arg("-I")
        .arg(workspace_root().join("include"))
        .args(sources)
        .arg("-o")
        .arg(out)
        .args(extra);
    run_ok(&mut cmd, &format!("cc {sources:?}"));
}

/// Where the runtime libraries are: the default `libtorchtrt_runtime.so`, the lean one,
/// and `libtorchtrt_plugins.so`, each in its own folder.
pub struct RuntimeLibs {
    /// Folder of the default (built-in plugins) `libtorchtrt_runtime.so`.
    pub default_dir: PathBuf,
    /// Folder of the lean `libtorchtrt_runtime.so`.
    pub lean_dir: PathBuf,
    /// `libtorchtrt_plugins.so`.
    pub plugins: PathBuf,
}

fn cargo_build(target: &Path, args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--offline", "--manifest-path"])
        .arg(workspace_root().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target)
        .args(args);
    run_ok(&mut cmd, &format!("cargo build {args:?}"));
}

fn copy_into(from: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("folder can be created");
    let to = dir.join(from.file_name().expect("a file name"));
    std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    to
}

/// Builds both runtime libraries and the plugin library with a cargo of their own in
/// `target/ext-tests/runtime` (so they never wait on the cargo running the tests, and
/// feature unification with the test build cannot bake plugins into the lean library),
/// one after the other, copying each result to a folder of its own.
pub fn runtime_libs() -> &'static RuntimeLibs {
    static LIBS: OnceLock<RuntimeLibs> = OnceLock::new();
    LIBS.get_or_init(|| {
        let target = workspace_root().join("target/ext-tests/runtime");
        let built = target.join("debug");
        let out = scratch_dir("libs");
        cargo_build(
            &target,
            &["-p", "torchtrt-runtime", "-p", "torchtrt-plugins"],
        );
        let default_dir = out.join("default");
        copy_into(&built.join("libtorchtrt_runtime.so"), &default_dir);
        let plugins = copy_into(&built.join("libtorchtrt_plugins.so"), &out.join("plugins"));
        cargo_build(
            &target,
            &["-p", "torchtrt-runtime", "--no-default-features"],
        );
        let lean_dir = out.join("lean");
        copy_into(&built.join("libtorchtrt_runtime.so"), &lean_dir);
        RuntimeLibs {
            default_dir,
            lean_dir,
            plugins,
        }
    })
}

/// Compiles a C program linked against the `libtorchtrt_runtime.so` in `runtime_dir`
/// (with an rpath to it).
pub fn runtime_program(sources: &[PathBuf], out: &Path, runtime_dir: &Path) {
    let rpath = format!("-Wl,-rpath,{}", runtime_dir.display());
    let libdir = format!("-L{}", runtime_dir.display());
    cc(
        sources,
        out,
        &[&libdir, "-ltorchtrt_runtime", &rpath, "-lm"],
    );
}

/// The input `examples/runtime_app_c` feeds: element i is `((i*7919) % 2001 - 1000) / 1000`.
pub fn app_input(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 2001) as f32 - 1000.0)
        .map(|v| v / 1000.0)
        .collect()
}

/// `|a - b| <= atol + rtol·|b|` element-wise with the shared comparison (NaN only NaN,
/// infinities only themselves), the worst element in the message.
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    let tol = torchtrt_testing::Tol::new(f64::from(rtol), f64::from(atol));
    torchtrt_testing::check_floats(got, want, tol).unwrap_or_else(|m| panic!("{m}"));
}

/// Deterministic pseudo-random f32 values in [-1, 1).
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
