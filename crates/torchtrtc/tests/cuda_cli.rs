//! `torchtrtc --device cuda[:N]`: without a GPU every command that needs one fails with exit
//! 1 and one `error: … no CUDA device …` line; with one, the demo model compiles for the GPU,
//! `inspect` shows where each layer runs and the stored kernel images, `run --check` agrees
//! with the reference and `bench` times the device-resident context.

mod support;

use std::path::PathBuf;

use support::{demo, fails, scratch_in, succeeds, torchtrtc};

fn scratch(name: &str) -> PathBuf {
    scratch_in("cuda-cli", name)
}

fn gpu() -> bool {
    torchtrt::cuda::probe::available()
}

#[test]
fn device_cuda_without_a_gpu_is_a_clear_error() {
    if gpu() {
        println!("skipped: a CUDA device is present");
        return;
    }
    let model = demo("demo.onnx");
    let model = model.to_str().unwrap();
    let engine = scratch("never.engine");
    let input = format!("x={}", demo("x.npy").display());
    for args in [
        vec![
            "compile",
            model,
            "-o",
            engine.to_str().unwrap(),
            "--device",
            "cuda",
        ],
        vec!["run", model, "--input", &input, "--device", "cuda:1"],
        vec!["bench", model, "--iterations", "1", "--device", "cuda"],
    ] {
        fails(&torchtrtc(&args), 1, &["--device cuda", "no CUDA device"]);
    }
    assert!(!engine.exists());
}

#[test]
fn device_values_are_checked_as_usage() {
    let model = demo("demo.onnx");
    for bad in ["gpu", "cuda:", "cuda:x", "cuda0"] {
        fails(
            &torchtrtc(["bench", model.to_str().unwrap(), "--device", bad]),
            2,
            &["expected cpu, cuda or cuda:N"],
        );
    }
}

#[test]
fn demo_compiles_runs_and_benches_on_the_gpu() {
    if !gpu() {
        println!("skipped: no CUDA device");
        return;
    }
    let engine = scratch("demo_cuda.engine");
    let engine = engine.to_str().unwrap();
    let model = demo("demo.onnx");
    succeeds(&torchtrtc([
        "compile",
        model.to_str().unwrap(),
        "-o",
        engine,
        "--device",
        "cuda",
    ]));
    let shown = succeeds(&torchtrtc(["inspect", engine]));
    for want in [
        "target: cuda sm_",
        "[cuda]",
        "stored kernel images",
        "cuda/plugins/",
    ] {
        assert!(shown.contains(want), "`{want}` missing from:\n{shown}");
    }
    let input = format!("x={}", demo("x.npy").display());
    let check = format!("y={}", demo("y.npy").display());
    let out = succeeds(&torchtrtc([
        "run", engine, "--input", &input, "--check", &check, "--atol", "1e-4", "--rtol", "1e-3",
    ]));
    assert!(out.contains("check y: ok"), "{out}");
    let out = succeeds(&torchtrtc([
        "run",
        model.to_str().unwrap(),
        "--device",
        "cuda:0",
        "--input",
        &input,
        "--check",
        &check,
        "--atol",
        "1e-4",
        "--rtol",
        "1e-3",
    ]));
    assert!(out.contains("check y: ok"), "{out}");
    let out = succeeds(&torchtrtc([
        "bench",
        engine,
        "--iterations",
        "5",
        "--warmup",
        "1",
        "--json",
        "--profile",
    ]));
    let last = out.lines().last().unwrap_or_default();
    assert!(last.contains("\"median_ms\""), "{out}");
}
