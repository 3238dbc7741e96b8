//! Building the example libraries under `examples/` in tests. Shared by the tests of every
//! crate that loads them (included with `#[path]`), so they all build into one target folder.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `examples/<dir>` with its own cargo and target folder `target/ext-tests` (so it
/// never waits on the cargo running the tests) and returns its `lib<lib>.so`.
pub fn build_example(dir: &str, lib: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace exists");
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
