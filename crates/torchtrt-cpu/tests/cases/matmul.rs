//! MatMul: batched, broadcast, transposed and 1-D operands, every float dtype.

use proptest::prelude::*;
use torchtrt_core::layers::MatMul;
use torchtrt_core::plugin_api::DType;

use crate::reference::matmul::matmul;
use crate::support::{Rng, Tol, check, float_dtype, nd, pooled, random, run, run_on};

/// Operand shapes: `a` of rank 1-4 holding `m × k` (or `k × m` when transposed), `b`
/// likewise with `k × n`, batch dims that broadcast.
fn shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, bool, bool)> {
    (
        1usize..7,
        1usize..9,
        1usize..7,
        1usize..=4,
        1usize..=4,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(m, k, n, ra, rb, ta, tb, seed)| {
            let mut rng = Rng::new(seed);
            let batch: Vec<usize> = (0..2).map(|_| rng.int(1, 3) as usize).collect();
            let pick =
                |rank: usize, rows: usize, cols: usize, t: bool, rng: &mut Rng| -> Vec<usize> {
                    if rank == 1 {
                        return vec![cols];
                    }
                    let lead = rank - 2;
                    let mut s: Vec<usize> = batch[2 - lead..]
                        .iter()
                        .map(|&d| if rng.coin() { d } else { 1 })
                        .collect();
                    s.extend(if t { [cols, rows] } else { [rows, cols] });
                    s
                };
            let a = pick(ra, m, k, ta, &mut rng);
            let b = if rb == 1 {
                vec![k]
            } else {
                pick(rb, k, n, tb, &mut rng)
            };
            (a, b, ta && ra > 1, tb && rb > 1)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference((sa, sb, ta, tb) in shapes(), dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let a = random(dtype, &sa, &mut rng, -1.0, 1.0);
        let b = random(dtype, &sb, &mut rng, -1.0, 1.0);
        let layer = MatMul { transpose_a: ta, transpose_b: tb };
        let got = run(layer, &[&a, &b])?;
        let k = if sb.len() == 1 { sb[0] } else if tb { sb[sb.len() - 1] } else { sb[sb.len() - 2] };
        let want = matmul(&nd(&a), &nd(&b), ta, tb);
        check(&got, &want, Tol::of(dtype).scaled((k as f64).sqrt()))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Products big enough for gemm's own threading, and many small batched ones.
    #[test]
    fn large_and_many(m in 40usize..90, k in 60usize..130, n in 40usize..90, batch in 8usize..20, dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let a = random(dtype, &[2, m, k], &mut rng, -1.0, 1.0);
        let b = random(dtype, &[k, n], &mut rng, -1.0, 1.0);
        let tol = Tol::of(dtype).scaled((k as f64).sqrt());
        check(&run(MatMul::default(), &[&a, &b])?, &matmul(&nd(&a), &nd(&b), false, false), tol)?;
        let a = random(dtype, &[batch, 5, k], &mut rng, -1.0, 1.0);
        let b = random(dtype, &[batch, n, k], &mut rng, -1.0, 1.0);
        let layer = MatMul { transpose_a: false, transpose_b: true };
        let got = run_on(pooled(), layer, &[&a, &b]).map_err(TestCaseError::fail)?;
        check(&got[0], &matmul(&nd(&a), &nd(&b), false, true), tol)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A fused bias (third input) added along the last axis: constant 2-D weights (the
    /// packed path on AVX-512, the general product below it), transposed or not, and
    /// batched weights (always the general product).
    #[test]
    fn bias_is_added_along_the_last_axis(m in 1usize..20, k in 1usize..70, n in 1usize..90, batch in 1usize..4, tb: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let a = random(DType::F32, &[batch, m, k], &mut rng, -1.0, 1.0);
        let bias = random(DType::F32, &[n], &mut rng, -1.0, 1.0);
        let tol = Tol::of(DType::F32).scaled((k as f64).sqrt());
        for b_shape in [vec![k, n], vec![batch, k, n]] {
            let mut b_shape = b_shape;
            if tb {
                let r = b_shape.len();
                b_shape.swap(r - 1, r - 2);
            }
            let b = random(DType::F32, &b_shape, &mut rng, -1.0, 1.0);
            let layer = MatMul { transpose_a: false, transpose_b: tb };
            let got = run(layer, &[&a, &b, &bias])?;
            let mut want = matmul(&nd(&a), &nd(&b), false, tb);
            let cols = nd(&bias).data;
            for row in want.data.chunks_mut(n) {
                for (y, c) in row.iter_mut().zip(&cols) {
                    *y += c;
                }
            }
            check(&got, &want, tol)?;
        }
    }
}

#[test]
fn a_bias_of_the_wrong_size_is_an_error() {
    let mut rng = Rng::new(3);
    let a = random(DType::F32, &[2, 3], &mut rng, -1.0, 1.0);
    let b = random(DType::F32, &[3, 4], &mut rng, -1.0, 1.0);
    let bias = random(DType::F32, &[5], &mut rng, -1.0, 1.0);
    let e = run_on(
        crate::support::global(),
        MatMul::default(),
        &[&a, &b, &bias],
    )
    .unwrap_err();
    assert!(e.contains("bias"), "{e}");
}
