//! Deployment case 3 of the plugin RFC: `examples/runtime_app_c`, a C program linked only
//! against the lean `libtorchtrt_runtime.so`, loads `libtorchtrt_plugins.so` at run time and
//! runs an engine that uses the seed plugins; its numbers match the Rust API's. The lean
//! library really has no plugins (the engine fails with plugin-not-found naming the key)
//! and the default one runs the engine with nothing loaded. Bad input from C, too.

mod capi_support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use capi_support::onnx_model::{CHANNELS, PLUGIN_KEYS, SIZE, seed_plugin_model};
use capi_support::{
    app_input, assert_close, run_ok, runtime_libs, runtime_program, scratch_dir, workspace_root,
};
use torchtrt::onnx::ImportOptions;
use torchtrt::{BuildConfig, Dim, Tensor};

const BATCH_OPT: usize = 2;

/// The seed-plugin model compiled by the Rust API (batch in [1, 4], opt 2), saved to a file.
fn engine_file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        torchtrt::init_plugins().unwrap();
        let model = torchtrt::onnx::decode_model(&seed_plugin_model(), "seed").unwrap();
        let dims = vec![
            Dim::dynamic("N", 1, BATCH_OPT as i64, 4),
            Dim::Fixed(CHANNELS as i64),
            Dim::Fixed(SIZE as i64),
            Dim::Fixed(SIZE as i64),
        ];
        let options = ImportOptions {
            input_dims: HashMap::from([("image".to_string(), dims)]),
            evaluator: torchtrt::default_backends().into_iter().next(),
            ..ImportOptions::default()
        };
        let net =
            torchtrt::onnx::import_model(&model, None, torchtrt::registry(), &options).unwrap();
        let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
        let path = scratch_dir("app").join("seed_plugins.engine");
        engine.save(&path).unwrap();
        path
    })
}

/// `examples/runtime_app_c` built with its Makefile against the runtime in `runtime_dir`.
fn runtime_app(runtime_dir: &Path, tag: &str) -> PathBuf {
    let out = scratch_dir(tag);
    let mut make = Command::new("make");
    make.arg("-C")
        .arg(workspace_root().join("examples/runtime_app_c"))
        .arg(format!("OUT={}", out.display()))
        .arg(format!("RUNTIME_DIR={}", runtime_dir.display()));
    run_ok(&mut make, "make examples/runtime_app_c");
    out.join("runtime_app")
}

/// Runs `program` as a user would: without the `LD_LIBRARY_PATH` cargo sets for tests,
/// which may hold another `libtorchtrt_runtime.so` that would win over the rpath.
fn run(program: &Path, args: &[&Path]) -> Output {
    Command::new(program)
        .env_remove("LD_LIBRARY_PATH")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()))
}

/// The values `runtime_app` printed after `output y [..]`, with the shape.
fn printed_output(stdout: &str) -> (Vec<usize>, Vec<f32>) {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("output y ["));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no output line in:\n{stdout}"));
    let shape = header
        .trim_start_matches("output y [")
        .trim_end_matches(']')
        .split(',')
        .map(|d| d.parse().unwrap())
        .collect();
    let values = lines
        .flat_map(str::split_whitespace)
        .map(|v| v.parse().unwrap())
        .collect();
    (shape, values)
}

/// The engine run through the Rust API on the app's input.
fn rust_reference() -> Vec<f32> {
    let engine = torchtrt::Runtime::new()
        .unwrap()
        .deserialize_file(engine_file())
        .unwrap();
    let shape = [BATCH_OPT, CHANNELS, SIZE, SIZE];
    let x = Tensor::from_vec(&shape, app_input(shape.iter().product())).unwrap();
    let out = engine.create_context().unwrap().execute(&[&x]).unwrap();
    out[0].as_slice::<f32>().unwrap().to_vec()
}

fn check_app_output(out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "runtime_app failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("input image [-1,3,5,5]"), "{stdout}");
    let (shape, values) = printed_output(&stdout);
    assert_eq!(shape, [BATCH_OPT, CHANNELS, 2 * SIZE, 2 * SIZE]);
    assert_close(&values, &rust_reference(), 1e-6, 1e-6);
}

#[test]
fn runtime_app_runs_seed_plugins_on_the_lean_runtime_with_the_plugin_library() {
    let libs = runtime_libs();
    let app = runtime_app(&libs.lean_dir, "app-lean");
    let out = run(&app, &[engine_file(), &libs.plugins]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("built-in plugins: no"), "{stdout}");
    assert!(stdout.contains("loaded "), "{stdout}");
    check_app_output(&out);
    let ldd = run_ok(
        Command::new("ldd").env_remove("LD_LIBRARY_PATH").arg(&app),
        "ldd runtime_app",
    );
    let deps = String::from_utf8_lossy(&ldd.stdout);
    assert!(deps.contains("libtorchtrt_runtime.so"), "{deps}");
    assert!(
        !deps.contains("libtorchtrt_plugins"),
        "linked only to the runtime: {deps}"
    );
}

#[test]
fn lean_runtime_has_no_builtin_plugins() {
    let libs = runtime_libs();
    let app = runtime_app(&libs.lean_dir, "app-lean-alone");
    let out = run(&app, &[engine_file()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ttrt_engine_deserialize_file") && stderr.contains("is not registered"),
        "{stderr}"
    );
    assert!(
        PLUGIN_KEYS.iter().any(|k| stderr.contains(k)),
        "the missing key is named: {stderr}"
    );
    let nm = run_ok(
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(libs.lean_dir.join("libtorchtrt_runtime.so")),
        "nm",
    );
    let symbols = String::from_utf8_lossy(&nm.stdout);
    assert!(
        symbols.contains("ttrt_context_execute"),
        "the C API is exported"
    );
    assert!(
        !symbols.contains("torchtrt_extension_v1"),
        "the lean library carries no plugin library"
    );
}

#[test]
fn default_runtime_runs_the_engine_without_loading_anything() {
    let libs = runtime_libs();
    let app = runtime_app(&libs.default_dir, "app-default");
    let out = run(&app, &[engine_file()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("built-in plugins: yes"), "{stdout}");
    check_app_output(&out);
}

#[test]
fn bad_input_from_c_through_the_lean_runtime() {
    let libs = runtime_libs();
    let exe = scratch_dir("errors").join("runtime_errors");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/runtime_errors.c");
    runtime_program(&[src], &exe, &libs.lean_dir);
    let out = run(&exe, &[engine_file(), &libs.plugins]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all checks passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
