//! GatherNd, ScatterNd, NonZero and ValueTest against element-by-element references, on
//! random shapes, tuple lengths, batch axes and dtypes.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::Tensor;
use torchtrt_core::layers::{
    GatherNd, NonZero, ScatterNd, ScatterReduction as S, ValueTest, ValueTestKind,
};
use torchtrt_core::plugin_api::DType;

use crate::reference::indexing::{gather_nd, non_zero, scatter_nd};
use crate::support::{Rng, Tol, check, float_dtype, from_f64, nd, numeric_dtype, random, run};

/// Data of rank 1 to 4 and index tuples of length `k` over it after `b` batch axes: the
/// data shape, the index shape (`batch…, tuples…, k`) and the indices (some negative).
fn tuples(seed: u64, batch_dims: bool) -> (Vec<usize>, Vec<usize>, Vec<i64>, usize) {
    let mut rng = Rng::new(seed);
    let rank = rng.int(1 + i64::from(batch_dims), 4) as usize;
    let data: Vec<usize> = (0..rank).map(|_| rng.int(1, 5) as usize).collect();
    let b = if batch_dims {
        rng.int(1, rank as i64 - 1) as usize
    } else {
        0
    };
    let k = rng.int(1, (rank - b) as i64) as usize;
    let mut ishape = data[..b].to_vec();
    for _ in 0..rng.int(0, 2) {
        ishape.push(rng.int(1, 4) as usize);
    }
    ishape.push(k);
    let tuples: usize =
        ishape[b..ishape.len() - 1].iter().product::<usize>() * data[..b].iter().product::<usize>();
    let mut idx = Vec::with_capacity(tuples * k);
    for _ in 0..tuples {
        for j in 0..k {
            let d = data[b + j] as i64;
            let v = rng.int(0, d - 1);
            idx.push(if rng.coin() { v - d } else { v });
        }
    }
    (data, ishape, idx, b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn gather_nd_matches_reference(dtype in numeric_dtype(), batch: bool, seed: u64) {
        let (shape, ishape, idx, b) = tuples(seed, batch);
        let data = random(dtype, &shape, &mut Rng::new(seed ^ 1), -9.0, 9.0);
        let it = Tensor::from_vec(&ishape, idx.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = run(GatherNd { batch_dims: b }, &[&data, &it])?;
        check(&got, &gather_nd(&nd(&data), &idx, &ishape, b), Tol::of(dtype))?;
    }

    #[test]
    fn scatter_nd_matches_reference(
        dtype in float_dtype(),
        reduction in select(vec![S::None, S::Add, S::Mul, S::Max, S::Min]),
        seed: u64,
    ) {
        let (shape, ishape, idx, _) = tuples(seed, false);
        let k = ishape[ishape.len() - 1];
        if reduction == S::None {
            let unique: std::collections::HashSet<Vec<i64>> = idx
                .chunks(k)
                .map(|t| t.iter().zip(&shape).map(|(&v, &d)| v.rem_euclid(d as i64)).collect())
                .collect();
            prop_assume!(unique.len() * k == idx.len());
        }
        let mut ushape = ishape[..ishape.len() - 1].to_vec();
        ushape.extend_from_slice(&shape[k..]);
        let mut rng = Rng::new(seed ^ 2);
        let data = random(dtype, &shape, &mut rng, -3.0, 3.0);
        let updates = random(dtype, &ushape, &mut rng, 0.5, 1.5);
        let it = Tensor::from_vec(&ishape, idx.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = run(ScatterNd { reduction }, &[&data, &it, &updates])?;
        let combine = |a: f64, u: f64| match reduction {
            S::None => u,
            S::Add => a + u,
            S::Mul => a * u,
            S::Max => a.max(u),
            S::Min => a.min(u),
        };
        let want = scatter_nd(&nd(&data), &idx, &ishape, &nd(&updates), combine);
        check(&got, &want, Tol::of(dtype).scaled(8.0))?;
    }

    #[test]
    fn non_zero_matches_reference(dtype in numeric_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let shape: Vec<usize> = (0..rng.int(0, 4)).map(|_| rng.int(1, 6) as usize).collect();
        let n: usize = shape.iter().product();
        let values: Vec<f64> = (0..n).map(|_| if rng.coin() { 0.0 } else { rng.int(1, 3) as f64 }).collect();
        let x = from_f64(dtype, &shape, &values);
        let got = run(NonZero, &[&x])?;
        check(&got, &non_zero(&nd(&x)), Tol::of(DType::I64))?;
    }

    #[test]
    fn value_tests_match_reference(dtype in float_dtype(), positive: bool, negative: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let n = rng.int(0, 300) as usize;
        let values: Vec<f64> = (0..n)
            .map(|_| match rng.int(0, 4) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                _ => rng.uniform(-1e3, 1e3),
            })
            .collect();
        let x = from_f64(dtype, &[n], &values);
        for test in [ValueTestKind::Nan, ValueTestKind::Inf { positive, negative }] {
            let got = run(ValueTest { test }, &[&x])?;
            let want = nd(&x).map(|v| if test.test(v) { 1.0 } else { 0.0 });
            check(&got, &want, Tol::of(DType::Bool))?;
        }
    }
}

#[test]
fn out_of_range_tuples_are_errors_naming_them() {
    let data = from_f64(DType::F32, &[2, 3], &[1.0; 6]);
    let idx = Tensor::from_vec(&[1, 2], vec![1i64, 3]).expect("tensor");
    let err = run(GatherNd { batch_dims: 0 }, &[&data, &idx]).expect_err("index 3 of 3");
    assert!(format!("{err:?}").contains("index 3"), "{err:?}");
    let upd = from_f64(DType::F32, &[1], &[1.0]);
    assert!(run(ScatterNd::default(), &[&data, &idx, &upd]).is_err());
}
