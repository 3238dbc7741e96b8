use super::*;
use crate::math::exp_f32_with;
use crate::simd::Fused;

/// The instruction sets this CPU has, whatever the level allows.
fn available() -> Vec<Isa> {
    let mut isas = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            if has!("avx512f") {
                isas.push(Isa::Avx512);
            }
            isas.push(Isa::Avx2);
        }
    }
    if isas.is_empty() {
        println!("skipped: no AVX2");
    }
    isas
}

/// Values in [-4, 4).
fn values(n: usize, seed: u64) -> Vec<f32> {
    torchtrt_testing::values(n, seed)
        .into_iter()
        .map(|v| v * 4.0)
        .collect()
}

/// `exp_shifted` equals the scalar exponential of `x − shift` bit for bit, for shifts at
/// least every value: across the range below zero, the lowest clamp, −∞ and NaN.
#[test]
fn exp_shifted_matches_the_scalar_steps() {
    let mut xs: Vec<f32> = (-2200..=0).map(|i| i as f32 * 0.05).collect();
    xs.extend([f32::NAN, f32::NEG_INFINITY, -87.3, -87.4, -0.0]);
    xs.extend(values(1000, 7));
    for isa in available() {
        for row in xs.chunks(isa.max_len() - 3) {
            let shift = row.iter().fold(0f32, |m, &v| m.max(v));
            let mut got = row.to_vec();
            assert!(exp_shifted_on(isa, &mut got, shift).is_some());
            for (&x, &g) in row.iter().zip(&got) {
                let want = exp_f32_with::<Fused>(x - shift);
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{isa:?} exp({x} - {shift}): {g} vs {want}"
                );
            }
        }
    }
}

/// Every row length each instruction set takes (full and masked last vectors) against
/// plain sums and maxima in f64, NaN propagated by max and min, softmax rows summing to one.
#[test]
fn every_row_length_matches_plain_folds() {
    for isa in available() {
        for len in 1..=isa.max_len() {
            check_rows(isa, len);
        }
    }
}

fn check_rows(isa: Isa, len: usize) {
    let rows = 3;
    let mut x = values(rows * len + 1, len as u64);
    x.truncate(rows * len);
    if len > 2 {
        x[len + len / 2] = f32::NAN;
    }
    for fold in [RowFold::Sum, RowFold::Mean, RowFold::Max, RowFold::Min] {
        let mut out = vec![1.0e30; rows];
        assert!(reduce_on(isa, fold, &x, len, &mut out));
        for (j, &got) in out.iter().enumerate() {
            let row = &x[j * len..(j + 1) * len];
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            let nan = row.iter().any(|v| v.is_nan());
            let want = match fold {
                RowFold::Sum => sum,
                RowFold::Mean => sum / len as f64,
                RowFold::Max | RowFold::Min if nan => f64::NAN,
                RowFold::Max => row.iter().fold(f64::MIN, |m, &v| m.max(v.into())),
                RowFold::Min => row.iter().fold(f64::MAX, |m, &v| m.min(v.into())),
            };
            let ok = (want.is_nan() && got.is_nan())
                || (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs() * 4.0);
            assert!(ok, "{isa:?} {fold:?} len {len} row {j}: {got} vs {want}");
        }
    }
    for log in [false, true] {
        let mut out = vec![f32::NAN; rows * len];
        assert!(softmax_on(isa, &x, len, log, &mut out));
        for (j, d) in out.chunks_exact(len).enumerate() {
            let row = &x[j * len..(j + 1) * len];
            if row.iter().any(|v| v.is_nan()) {
                assert!(
                    d.iter().all(|v| v.is_nan()),
                    "{isa:?} len {len} row {j}: NaN row"
                );
                continue;
            }
            let m = row.iter().fold(f64::MIN, |m, &v| m.max(v.into()));
            let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
            for (&v, &g) in row.iter().zip(d) {
                let p = (f64::from(v) - m).exp() / s;
                let want = if log { p.ln() } else { p };
                assert!(
                    (f64::from(g) - want).abs() <= 2e-6 * (1.0 + want.abs()),
                    "{isa:?} log {log} len {len} row {j}: {g} vs {want}"
                );
            }
        }
    }
    let mut e = x[..len].to_vec();
    let shift = 4.0;
    let sum = exp_shifted_on(isa, &mut e, shift).expect("taken");
    let want: f64 = x[..len].iter().map(|&v| (f64::from(v) - 4.0).exp()).sum();
    assert!(
        (f64::from(sum) - want).abs() <= 1e-5 * want,
        "{isa:?} exp_shifted len {len}: {sum} vs {want}"
    );
    for (&v, &g) in x[..len].iter().zip(&e) {
        let w = (f64::from(v) - 4.0).exp();
        assert!(
            (f64::from(g) - w).abs() <= 2e-6 * w,
            "{isa:?} len {len}: {g} vs {w}"
        );
    }
}

#[test]
fn refuses_what_it_cannot_take() {
    for isa in available() {
        let mut out = [0.0; 2];
        let long = isa.max_len() + 1;
        assert!(
            !reduce_on(isa, RowFold::Sum, &[1.0; 3], 2, &mut out),
            "x too short"
        );
        assert!(
            !reduce_on(isa, RowFold::Sum, &vec![1.0; 2 * long], long, &mut out),
            "rows too long"
        );
        assert!(
            !reduce_on(isa, RowFold::Sum, &[], 0, &mut out),
            "empty rows"
        );
        let mut long_row = vec![0.0; long];
        assert!(
            exp_shifted_on(isa, &mut long_row, 0.0).is_none(),
            "row too long"
        );
        assert!(
            !softmax_on(isa, &[1.0; 3], 2, false, &mut [0.0; 4]),
            "lengths differ"
        );
        assert!(
            !softmax_on(isa, &[1.0; 3], 2, false, &mut [0.0; 3]),
            "not whole rows"
        );
    }
}
