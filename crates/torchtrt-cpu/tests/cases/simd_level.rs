//! The instruction-set switch: `TORCHTRT_CPU_SIMD` caps the level every kernel runs at, so
//! `scripts/test` can run this suite once per level the machine has.

/// The level the kernels report is the CPU's, capped by the switch (an unknown value is no
/// cap, so a typo in `scripts/test` would show here as the wrong level).
#[test]
fn the_level_follows_the_switch() {
    let detected = detected();
    let want = match std::env::var("TORCHTRT_CPU_SIMD").as_deref() {
        Ok("generic" | "scalar") => "generic",
        Ok("v3" | "avx2") => detected.min("v3"),
        Ok("v4" | "avx512") | Err(_) => detected,
        Ok(other) => panic!("TORCHTRT_CPU_SIMD={other}: not generic|v3|v4"),
    };
    assert_eq!(torchtrt_cpu::simd_level(), want);
}

/// The CPU's own level ("generic" < "v3" < "v4" also in string order).
fn detected() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        let v3 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if v3 && std::is_x86_feature_detected!("avx512f") {
            return "v4";
        }
        if v3 {
            return "v3";
        }
    }
    "generic"
}
