#![allow(dead_code)]

use std::path::PathBuf;

pub mod examples;

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

/// `|a - b| <= atol + rtol·|b|` element-wise with the shared comparison (NaN only NaN,
/// infinities only themselves), the worst element in the message.
pub fn assert_close(got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    let tol = torchtrt_testing::Tol::new(f64::from(rtol), f64::from(atol));
    torchtrt_testing::check_floats(got, want, tol).unwrap_or_else(|m| panic!("{m}"));
}
