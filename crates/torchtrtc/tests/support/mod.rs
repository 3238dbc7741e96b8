//! Shared by the `torchtrtc` binary tests: running the built binary as a user would and
//! checking what it printed and how it exited.

#![allow(dead_code, reason = "each test binary uses its own subset")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A file of the README's demo under `models/demo`.
pub fn demo(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/demo")
        .join(file)
}

/// `name` inside a folder of this test process's own (`tag`-<pid>) under cargo's test
/// scratch space.
pub fn scratch_in(tag: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs the built `torchtrtc` with `args`.
pub fn torchtrtc<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_torchtrtc"))
        .args(args)
        .output()
        .expect("torchtrtc runs")
}

/// Bytes printed by the binary, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts a zero exit and returns stdout.
pub fn succeeds(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Asserts exit `code`, no panic, every `needle` on stderr and, for exit 1, exactly one
/// stderr line starting `error: `; returns stderr.
pub fn fails(out: &Output, code: i32, needles: &[&str]) -> String {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{err}",
        text(&out.stdout)
    );
    assert!(!err.contains("panicked"), "{err}");
    if code == 1 {
        assert_eq!(err.trim_end().lines().count(), 1, "one line wanted:\n{err}");
        assert!(err.starts_with("error: "), "{err}");
    }
    for n in needles {
        assert!(err.contains(n), "`{n}` missing from:\n{err}");
    }
    err
}

/// Writes a version-1.0 `.npy` file.
pub fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}
