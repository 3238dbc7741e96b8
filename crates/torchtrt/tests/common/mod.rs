#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

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

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace exists")
}

/// `|a - b| <= atol + rtol·|b|` element-wise, with the worst element in the message.
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let mut worst = (0usize, 0f32);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let excess = (g - w).abs() - (atol + rtol * w.abs());
        if excess > worst.1 || g.is_nan() != w.is_nan() {
            worst = (i, excess.max(f32::MIN_POSITIVE));
        }
    }
    assert!(
        worst.1 <= 0.0,
        "element {}: got {}, want {}",
        worst.0,
        got[worst.0],
        want[worst.0]
    );
}

/// Builds `examples/<dir>` with its own cargo and target folder (so it never waits on the
/// cargo running the tests) and returns `lib<lib>.so`.
pub fn build_example(dir: &str, lib: &str) -> PathBuf {
    let root = workspace_root();
    let target = root.join("target/ext-tests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["build", "--offline", "--manifest-path"])
        .arg(root.join("examples").join(dir).join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building examples/{dir} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join(format!("debug/lib{lib}.so"))
}
