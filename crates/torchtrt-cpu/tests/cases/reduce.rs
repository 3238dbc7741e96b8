//! Reduce: every reduction over random axis sets (negative, repeated order, empty = all),
//! keep_dims, floats and integers; axes as a field or as an input tensor.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::Tensor;
use torchtrt_core::layers::{Reduce, ReduceOp as R};
use torchtrt_core::plugin_api::DType;

use crate::reference::cast::cast;
use crate::reference::reduce::reduce;
use crate::support::{Rng, Tol, check, float_dtype, from_f64, int_dtype, nd, random, run, shape};

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

/// A shape and axes of it: some subset, written with random signs and order.
fn shape_and_axes() -> impl Strategy<Value = (Vec<usize>, Vec<i64>)> {
    (shape(4, 5), any::<u64>()).prop_map(|(shape, seed)| {
        let mut rng = Rng::new(seed);
        let rank = shape.len() as i64;
        let mut axes = Vec::new();
        for a in 0..rank {
            if rng.coin() {
                axes.push(if rng.coin() { a - rank } else { a });
            }
        }
        if axes.len() > 1 && rng.coin() {
            axes.reverse();
        }
        (shape, axes)
    })
}

fn resolve(axes: &[i64], rank: usize) -> Vec<usize> {
    if axes.is_empty() {
        return (0..rank).collect();
    }
    let mut r: Vec<usize> = axes
        .iter()
        .map(|&a| {
            if a < 0 {
                (a + rank as i64) as usize
            } else {
                a as usize
            }
        })
        .collect();
    r.sort_unstable();
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn float_reductions(op in select(OPS.to_vec()), (shape, axes) in shape_and_axes(), keep_dims: bool, dtype in float_dtype(), seed: u64) {
        let (lo, hi) = if op == R::Prod { (0.5, 1.5) } else { (-2.0, 2.0) };
        let x = random(dtype, &shape, &mut Rng::new(seed), lo, hi);
        let layer = Reduce { op, axes: axes.clone(), keep_dims };
        let got = run(layer, &[&x])?;
        let want = reduce(&nd(&x), op, &resolve(&axes, shape.len()), keep_dims, false);
        let n = x.numel() as f64 / want.data.len().max(1) as f64;
        check(&got, &want, Tol::of(dtype).scaled(2.0 * n))?;
    }

    #[test]
    fn integer_reductions(op in select(OPS.to_vec()), (shape, axes) in shape_and_axes(), keep_dims: bool, dtype in int_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let x = match (op, dtype) {
            (R::Prod, _) => {
                let n = shape.iter().product();
                let factor = |rng: &mut Rng| match rng.int(0, 9) {
                    0 => 2.0,
                    1 if dtype != DType::U8 => -1.0,
                    _ => 1.0,
                };
                let values: Vec<f64> = (0..n).map(|_| factor(&mut rng)).collect();
                from_f64(dtype, &shape, &values)
            }
            (_, DType::U8) => random(dtype, &shape, &mut rng, 0.0, 9.0),
            _ => random(dtype, &shape, &mut rng, -9.0, 9.0),
        };
        let got = run(Reduce { op, axes: axes.clone(), keep_dims }, &[&x])?;
        let want = reduce(&nd(&x), op, &resolve(&axes, shape.len()), keep_dims, true)
            .map(|v| cast(v, DType::I64, dtype));
        check(&got, &want, Tol::of(dtype))?;
    }

    #[test]
    fn axes_given_as_an_input(op in select(OPS.to_vec()), (shape, axes) in shape_and_axes(), keep_dims: bool, seed: u64) {
        let (lo, hi) = if op == R::Prod { (0.5, 1.5) } else { (-2.0, 2.0) };
        let x = random(DType::F32, &shape, &mut Rng::new(seed), lo, hi);
        let axes_t = Tensor::from_slice(&[axes.len()], &axes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let layer = Reduce { op, axes: Vec::new(), keep_dims };
        let got = run(layer, &[&x, &axes_t])?;
        let want = reduce(&nd(&x), op, &resolve(&axes, shape.len()), keep_dims, false);
        let n = x.numel() as f64 / want.data.len().max(1) as f64;
        check(&got, &want, Tol::of(DType::F32).scaled(2.0 * n))?;
    }
}
