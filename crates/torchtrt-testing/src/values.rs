//! Inputs for tests and benchmarks: a fixed xorshift stream per seed, never all zeros.

/// `n` values uniform in `[lo, hi)`, the same for the same `seed`.
pub fn uniform(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// `n` values in `[-1, 1)`: [`uniform`] over that range.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    uniform(n, seed, -1.0, 1.0)
}
