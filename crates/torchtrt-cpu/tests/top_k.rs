//! TopK against a stable sort: float and integer dtypes, largest and smallest, ties by
//! lower index, NaNs, and `k` known only at run time (the output shape follows it through
//! a built engine).

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::layers::{TopK, UNKNOWN_DIM};
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{LayerKind, Tensor};

use reference::Nd;
use support::{Rng, Tol, check, from_f64, global, nd, numeric_dtype, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// Values and positions of the `k` best elements of each line along `axis`, best first,
/// equal values by position (a NaN is the largest value).
fn top_k(x: &Nd, axis: usize, k: usize, largest: bool) -> (Nd, Nd) {
    let mut shape = x.shape.clone();
    shape[axis] = k;
    let line = |idx: &[usize]| -> Vec<(f64, usize)> {
        let mut v: Vec<(f64, usize)> = (0..x.shape[axis])
            .map(|i| {
                let mut at = idx.to_vec();
                at[axis] = i;
                (x.at(&at), i)
            })
            .collect();
        let key = |a: f64| if a.is_nan() { f64::INFINITY } else { a };
        v.sort_by(|a, b| {
            let (p, q) = (key(a.0), key(b.0));
            let o = p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal);
            let o = o.then(a.0.is_nan().cmp(&b.0.is_nan()));
            if largest { o.reverse() } else { o }
        });
        v
    };
    let values = Nd::from_fn(shape.clone(), |idx| line(idx)[idx[axis]].0);
    let positions = Nd::from_fn(shape, |idx| line(idx)[idx[axis]].1 as f64);
    (values, positions)
}

fn k_tensor(k: i64) -> Tensor {
    Tensor::from_vec(&[1], vec![k]).expect("one value")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn matches_reference(
        shape in proptest::collection::vec(1usize..=6, 1..=3),
        dtype in numeric_dtype(),
        largest: bool,
        ties: bool,
        picks: (u8, u8),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = shape.len();
        let axis = usize::from(picks.0) % rank;
        let k = usize::from(picks.1) % (shape[axis] + 1);
        let n: usize = shape.iter().product();
        let values: Vec<f64> = (0..n)
            .map(|_| if ties { rng.int(0, 3) as f64 } else { rng.uniform(0.0, 100.0) })
            .collect();
        let x = from_f64(dtype, &shape, &values);
        let signed_axis = if rng.coin() { axis as i64 - rank as i64 } else { axis as i64 };
        let layer = TopK { axis: signed_axis, largest, sorted: true };
        let got = run_on(global(), layer, &[&x, &k_tensor(k as i64)]).map_err(TestCaseError::fail)?;
        let (want_v, want_i) = top_k(&nd(&x), axis, k, largest);
        prop_assert_eq!(got[0].dtype(), dtype);
        prop_assert_eq!(got[1].dtype(), DType::I64);
        check(&got[0], &want_v, Tol::of(DType::I64))?;
        check(&got[1], &want_i, Tol::of(DType::I64))?;
    }
}

#[test]
fn nans_rank_above_numbers() {
    let x = from_f64(DType::F32, &[5], &[1.0, f64::NAN, 3.0, f64::NAN, -1.0]);
    let largest = run_on(
        global(),
        TopK {
            axis: 0,
            largest: true,
            sorted: true,
        },
        &[&x, &k_tensor(3)],
    )
    .expect("largest");
    assert_eq!(largest[1].to_i64_vec(), Some(vec![1, 3, 2]));
    let smallest = run_on(
        global(),
        TopK {
            axis: 0,
            largest: false,
            sorted: true,
        },
        &[&x, &k_tensor(4)],
    )
    .expect("smallest");
    assert_eq!(smallest[1].to_i64_vec(), Some(vec![4, 0, 2, 1]));
}

#[test]
fn shape_rule_follows_k() {
    let kind = LayerKind::from(TopK {
        axis: -1,
        largest: true,
        sorted: true,
    });
    let unknown = [
        BuildInput::new(DType::F32, &["n", "m"]),
        BuildInput::new(DType::I64, &["1"]),
    ];
    let out = infer(&kind, &unknown).expect("k unknown");
    assert_eq!(out[0].1, vec![DimExpr::sym("n"), DimExpr::sym(UNKNOWN_DIM)]);
    assert_eq!(out[1].0, DType::I64);
    let known = [
        BuildInput::new(DType::F32, &["n", "m"]),
        BuildInput::constant(k_tensor(3)),
    ];
    let out = infer(&kind, &known).expect("k known");
    assert_eq!(out[0], (DType::F32, sym(&["n", "3"])));
    assert_eq!(out[1], (DType::I64, sym(&["n", "3"])));
    let too_many = [
        BuildInput::new(DType::F32, &["n", "2"]),
        BuildInput::constant(k_tensor(3)),
    ];
    assert!(infer(&kind, &too_many).is_err());
    let negative = [
        BuildInput::new(DType::F32, &["n", "2"]),
        BuildInput::constant(k_tensor(-1)),
    ];
    assert!(infer(&kind, &negative).is_err());
    let float_k = [
        BuildInput::new(DType::F32, &["n", "2"]),
        BuildInput::new(DType::F32, &["1"]),
    ];
    assert!(infer(&kind, &float_k).is_err());
}

#[test]
fn prepared_with_unknown_k_runs_with_each_k() {
    let kind = LayerKind::from(TopK {
        axis: 0,
        largest: false,
        sorted: true,
    });
    let symbolic = [
        BuildInput::new(DType::F64, &["n", "2"]),
        BuildInput::new(DType::I64, &["1"]),
    ];
    let mut rng = Rng::new(4);
    let x = support::random(DType::F64, &[6, 2], &mut rng, -1.0, 1.0);
    let ks: Vec<Tensor> = [0, 2, 6].iter().map(|&k| k_tensor(k)).collect();
    let runs: Vec<Vec<_>> = ks.iter().map(|k| vec![&x, k]).collect();
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    for (k, out) in [0, 2, 6].iter().zip(&got) {
        let (v, i) = top_k(&nd(&x), 0, *k, false);
        check(&out[0], &v, Tol::of(DType::I64)).expect("values");
        check(&out[1], &i, Tol::of(DType::I64)).expect("indices");
    }
    let too_many = k_tensor(7);
    let err = run_prepared(global(), &kind, &symbolic, &[vec![&x, &too_many]])
        .expect_err("k beyond the axis");
    assert!(err.contains("k = 7"), "{err}");
}

#[test]
fn engine_output_shape_follows_k_at_run_time() {
    let layer = LayerKind::from(TopK {
        axis: -1,
        largest: true,
        sorted: true,
    });
    let inputs = [
        (
            "x",
            DType::F32,
            vec![Dim::Fixed(2), Dim::dynamic("n", 1, 8, 16)],
        ),
        ("k", DType::I64, vec![Dim::Fixed(1)]),
    ];
    let mut rng = Rng::new(5);
    let x = support::random(DType::F32, &[2, 9], &mut rng, -1.0, 1.0);
    let ks: Vec<Tensor> = [1, 4, 9].iter().map(|&k| k_tensor(k)).collect();
    let runs: Vec<Vec<_>> = ks.iter().map(|k| vec![&x, k]).collect();
    let got = run_engine(layer, &inputs, &runs).expect("engine");
    for (k, out) in [1usize, 4, 9].iter().zip(&got) {
        let (v, i) = top_k(&nd(&x), 1, *k, true);
        assert_eq!(out[0].shape(), [2, *k]);
        check(&out[0], &v, Tol::of(DType::I64)).expect("values");
        check(&out[1], &i, Tol::of(DType::I64)).expect("indices");
    }
}

#[test]
fn large_lines_on_both_backends() {
    let mut rng = Rng::new(9);
    let x = support::random(DType::F32, &[30, 1000, 2], &mut rng, -1.0, 1.0);
    let layer = TopK {
        axis: 1,
        largest: true,
        sorted: true,
    };
    let k = k_tensor(17);
    let (v, i) = top_k(&nd(&x), 1, 17, true);
    for backend in [global(), support::pooled()] {
        let got = run_on(backend, layer.clone(), &[&x, &k]).expect("run");
        check(&got[0], &v, Tol::of(DType::I64)).expect("values");
        check(&got[1], &i, Tol::of(DType::I64)).expect("indices");
    }
}
