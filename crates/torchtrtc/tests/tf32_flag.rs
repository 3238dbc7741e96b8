//! `torchtrtc compile --tf32` stores the flag in the engine, and `inspect` shows it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn torchtrtc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_torchtrtc"))
        .args(args)
        .output()
        .expect("torchtrtc runs")
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "torchtrtc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn compiled(name: &str, extra: &[&str]) -> PathBuf {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo/demo.onnx");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tf32_flag");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let engine = dir.join(name);
    let mut args = vec![
        "compile",
        model.to_str().expect("utf-8 path"),
        "-o",
        engine.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(extra);
    stdout_of(&torchtrtc(&args));
    engine
}

#[test]
fn tf32_flag_is_stored_and_inspected() {
    let with = compiled("tf32.engine", &["--tf32"]);
    let without = compiled("f32.engine", &[]);
    let inspect = |p: &Path| stdout_of(&torchtrtc(&["inspect", p.to_str().expect("utf-8")]));
    let (a, b) = (inspect(&with), inspect(&without));
    assert!(a.contains("(f32, tf32)"), "{a}");
    assert!(b.contains("target: cpu (f32)\n"), "{b}");
}
