//! Reduce, Softmax and Normalization on shapes that reach every path of their kernels:
//! long runs (vector lanes and their tails), few long rows split into parts, reduced axes
//! before a kept inner axis (columns, in blocks), and few columns split over the reduced
//! rows; against f64 references, on both backends' pools, and under every SIMD level the
//! CPU has (`scripts/test` runs the suite with `TORCHTRT_CPU_SIMD` at each level).

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::Tensor;
use torchtrt_core::layers::{Normalization, Reduce, ReduceOp as R, Softmax};
use torchtrt_core::plugin_api::DType;

use crate::reference::Nd;
use crate::reference::normalization::normalize;
use crate::reference::reduce::reduce;
use crate::reference::softmax::softmax;
use crate::support::{Rng, Tol, check, from_f64, nd, pooled, random_signed, run, run_on};

const OPS: [R; 9] = [
    R::Sum,
    R::Mean,
    R::Max,
    R::Min,
    R::Prod,
    R::L1,
    R::L2,
    R::SumSquare,
    R::LogSumExp,
];

/// A shape and the axes to reduce, one of the kernel's layouts chosen by `kind`:
/// 0 one long run per row, 1 runs split by a kept axis, 2 columns, 3 few columns over
/// many reduced rows, 4 few long rows.
fn layout(kind: u8, rng: &mut Rng) -> (Vec<usize>, Vec<usize>) {
    let mut n = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
    match kind {
        0 => (vec![n(1, 40), n(1, 300)], vec![1]),
        1 => (vec![n(1, 4), n(2, 5), n(1, 3), n(1, 90)], vec![1, 3]),
        2 => (vec![n(1, 5), n(1, 40), n(2, 700)], vec![1]),
        3 => (vec![n(6000, 20000), n(2, 5)], vec![0]),
        _ => (vec![n(1, 3), n(33000, 60000)], vec![1]),
    }
}

/// The largest `Σ |x|` over the groups a reduction over `axes` forms (the scale of its
/// rounding error).
fn largest_l1(x: &Nd, axes: &[usize]) -> f64 {
    let sums = reduce(&x.map(f64::abs), R::Sum, axes, true, false);
    sums.data.iter().copied().fold(0.0, f64::max)
}

/// Values for `op`: products near 1 so long ones stay finite, otherwise magnitudes in
/// `[0.25, 2)` with random signs.
fn values(op: R, dtype: DType, shape: &[usize], rng: &mut Rng) -> Tensor {
    if op == R::Prod {
        let n: usize = shape.iter().product();
        let spread = 1.0 / (n as f64).sqrt();
        let v: Vec<f64> = (0..n).map(|_| 1.0 + rng.uniform(-spread, spread)).collect();
        return from_f64(dtype, shape, &v);
    }
    random_signed(dtype, shape, rng, 0.25, 2.0)
}

fn dtype() -> impl Strategy<Value = DType> {
    select(vec![DType::F32, DType::F32, DType::F16, DType::F64])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn reduce_layouts(op in select(OPS.to_vec()), kind in 0u8..5, dtype in dtype(), pool: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let (shape, axes) = layout(kind, &mut rng);
        let x = values(op, dtype, &shape, &mut rng);
        let layer = Reduce { op, axes: axes.iter().map(|&a| a as i64).collect(), keep_dims: false };
        let got = if pool {
            run_on(pooled(), layer, &[&x]).map_err(TestCaseError::fail)?.remove(0)
        } else {
            run(layer, &[&x])?
        };
        let xs = nd(&x);
        let mut want = reduce(&xs, op, &axes, false, false);
        if dtype == DType::F16 {
            want = want.map(|v| half::f16::from_f64(v).to_f64());
        }
        let count = (x.numel() / want.data.len().max(1)) as f64;
        let rtol = Tol::of(dtype).rtol;
        let tol = match op {
            R::Max | R::Min => Tol { rtol: 0.0, atol: 0.0 },
            R::Sum | R::L1 => Tol { rtol, atol: 1e-6 * largest_l1(&xs, &axes) },
            R::Mean => Tol { rtol, atol: 1e-6 * largest_l1(&xs, &axes) / count },
            R::SumSquare => Tol { rtol, atol: 1e-6 * largest_l1(&xs.map(|v| v * v), &axes) },
            R::Prod if dtype != DType::F64 => Tol { rtol: rtol + count * 1.2e-7, atol: 0.0 },
            _ => Tol::of(dtype).scaled(1.0),
        };
        check(&got, &want, tol)?;
    }

    #[test]
    fn softmax_layouts(kind in 0u8..4, log: bool, dtype in dtype(), pool: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut n = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
        let (shape, axis) = match kind {
            0 => (vec![n(1, 50), n(1, 300)], 1),
            1 => (vec![n(4, 12), n(1, 30), n(2, 700)], 1),
            2 => (vec![n(1, 2), n(1, 30), n(65, 1500)], 1),
            _ => (vec![n(1, 40), n(2, 9), n(1, 3)], 1),
        };
        let x = random_signed(dtype, &shape, &mut rng, 0.0, 6.0);
        let layer = Softmax { axis: axis as i64, log };
        let got = if pool {
            run_on(pooled(), layer, &[&x]).map_err(TestCaseError::fail)?.remove(0)
        } else {
            run(layer, &[&x])?
        };
        let want = softmax(&nd(&x), axis, log);
        check(&got, &want, Tol::of(dtype).scaled(if log { 8.0 } else { 1e-3 }))?;
    }

    #[test]
    fn normalization_layouts(kind in 0u8..4, dtype in dtype(), pool: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut n = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
        let (shape, axes, scale_shape, bias_shape) = match kind {
            0 => {
                let (r, c) = (n(1, 60), n(1, 300));
                (vec![r, c], vec![1], vec![c], vec![c])
            }
            1 => {
                let (r, c) = (n(1, 3), n(33000, 60000));
                (vec![r, c], vec![1], vec![c], vec![1])
            }
            2 => {
                let (b, g, k) = (n(1, 3), n(1, 8), n(1, 500));
                (vec![b, g, k], vec![2], vec![g, 1], vec![g, 1])
            }
            _ => {
                let (a, b, c) = (n(1, 4), n(2, 20), n(2, 70));
                (vec![a, b, c], vec![1], vec![b, 1], vec![c])
            }
        };
        let x = random_signed(dtype, &shape, &mut rng, 0.0, 3.0);
        let s = random_signed(dtype, &scale_shape, &mut rng, 0.5, 1.5);
        let b = random_signed(dtype, &bias_shape, &mut rng, 0.0, 1.0);
        let layer = Normalization { axes: axes.iter().map(|&a| a as i64).collect(), epsilon: 1e-5 };
        let got = if pool {
            run_on(pooled(), layer, &[&x, &s, &b]).map_err(TestCaseError::fail)?.remove(0)
        } else {
            run(layer, &[&x, &s, &b])?
        };
        let (want, min_std) = normalize(&nd(&x), &axes, f64::from(1e-5f32), Some(&nd(&s)), Some(&nd(&b)));
        check(&got, &want, Tol::of(dtype).scaled((4.0 / min_std).max(4.0)))?;
    }
}

/// A NaN in any lane of a row's vector accumulators survives every merge of the lanes
/// (the merges are branch-free bit operations): rows of lengths around the lane counts,
/// row `i` holding its NaN at position `i`, the last row none.
#[test]
fn nan_in_every_lane_survives_the_merges() {
    let mut rng = Rng::new(5);
    for n in [1usize, 7, 8, 9, 31, 32, 33, 64, 67, 130] {
        let x = random_signed(DType::F32, &[n + 1, n], &mut rng, 0.25, 2.0);
        let mut v = x.to_f64_vec();
        for i in 0..n {
            v[i * n + i] = f64::NAN;
        }
        let x = from_f64(DType::F32, &[n + 1, n], &v);
        for op in [R::Max, R::Min] {
            let layer = Reduce {
                op,
                axes: vec![1],
                keep_dims: false,
            };
            let got = run(layer, &[&x]).expect("runs").to_f64_vec();
            for (i, g) in got[..n].iter().enumerate() {
                assert!(g.is_nan(), "{op:?} n={n}: row {i} is {g}, want NaN");
            }
            let last = &v[n * n..];
            let want = last.iter().copied().reduce(|a, b| match op {
                R::Max => a.max(b),
                _ => a.min(b),
            });
            assert_eq!(Some(got[n]), want, "{op:?} n={n}: the row without NaN");
        }
    }
}

/// NaN anywhere in a group makes its maximum and minimum NaN, on every path.
#[test]
fn nan_propagates_through_max_and_min() {
    for kind in 0..5 {
        let mut rng = Rng::new(kind as u64 + 11);
        let (shape, axes) = layout(kind, &mut rng);
        let x = random_signed(DType::F32, &shape, &mut rng, 0.25, 2.0);
        let mut v = x.to_f64_vec();
        let at = rng.int(0, v.len() as i64 - 1) as usize;
        v[at] = f64::NAN;
        let x = from_f64(DType::F32, &shape, &v);
        let xs = nd(&x);
        let dirty: Vec<bool> = {
            let flags = xs.map(|v| if v.is_nan() { 1.0 } else { 0.0 });
            let r = reduce(&flags, R::Sum, &axes, false, false);
            r.data.iter().map(|&c| c > 0.0).collect()
        };
        for op in [R::Max, R::Min] {
            let layer = Reduce {
                op,
                axes: axes.iter().map(|&a| a as i64).collect(),
                keep_dims: false,
            };
            let got = run(layer, &[&x]).expect("runs").to_f64_vec();
            let clean = reduce(
                &xs.map(|v| if v.is_nan() { 0.0 } else { v }),
                op,
                &axes,
                false,
                false,
            );
            for (i, (&g, &d)) in got.iter().zip(&dirty).enumerate() {
                if d {
                    assert!(
                        g.is_nan(),
                        "{op:?} layout {kind}: element {i} is {g}, want NaN"
                    );
                } else {
                    assert_eq!(g, clean.data[i], "{op:?} layout {kind}: element {i}");
                }
            }
        }
    }
}
