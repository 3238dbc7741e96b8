//! Shared helpers for the GPU tests: open a device or skip, random data.

#![allow(dead_code)]

#[path = "../../../torchtrt-core/tests/common/scale.rs"]
pub mod scale;

use torchtrt_cuda::{CudaDevice, CudaError};

/// `cuda:0`, or `None` after printing why the test is skipped.
pub fn device_or_skip() -> Option<CudaDevice> {
    match CudaDevice::open(0) {
        Ok(d) => Some(d),
        Err(CudaError::NoDevice(reason)) => {
            println!("skipped: no CUDA device ({reason})");
            None
        }
        Err(e) => panic!("a CUDA driver is present but cuda:0 failed to open: {e}"),
    }
}

/// `n` pseudo-random floats in [-2, 2) from `seed` (xorshift).
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    torchtrt_testing::uniform(n, seed, -2.0, 2.0)
}

/// Little-endian bytes of `v`.
pub fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Floats from little-endian bytes.
pub fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
