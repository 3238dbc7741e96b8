//! Trilu against the triangle condition, every dtype, `k` absent, given at build time or
//! only at run time, including extreme values.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::layers::Trilu;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{LayerKind, Tensor};

use reference::Nd;
use support::{Rng, Tol, check, global, nd, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// Keeps `(i, j)` of each trailing matrix when `j − i ≥ k` (upper) or `j − i ≤ k`.
fn trilu(x: &Nd, k: i64, upper: bool) -> Nd {
    let r = x.shape.len();
    Nd::from_fn(x.shape.clone(), |idx| {
        let d = idx[r - 1] as i128 - idx[r - 2] as i128;
        let keep = if upper {
            d >= k as i128
        } else {
            d <= k as i128
        };
        if keep { x.at(idx) } else { 0.0 }
    })
}

fn k_tensor(k: i64) -> Tensor {
    Tensor::from_vec(&[], vec![k]).expect("one value")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn matches_reference(
        shape in proptest::collection::vec(1usize..=6, 2..=4),
        dtype in proptest::sample::select(DType::ALL.to_vec()),
        upper: bool,
        k in -8i64..=8,
        with_k: bool,
        seed: u64,
    ) {
        let x = random(dtype, &shape, &mut Rng::new(seed), 1.0, 50.0);
        let kt = k_tensor(k);
        let inputs = if with_k { vec![&x, &kt] } else { vec![&x] };
        let got = run(Trilu { upper }, &inputs)?;
        check(&got, &trilu(&nd(&x), if with_k { k } else { 0 }, upper), Tol::of(DType::I64))?;
    }
}

#[test]
fn extreme_k_keeps_all_or_nothing() {
    let mut rng = Rng::new(1);
    let x = random(DType::F32, &[3, 4], &mut rng, 1.0, 2.0);
    for (k, upper) in [
        (i64::MAX, true),
        (i64::MIN, true),
        (i64::MAX, false),
        (i64::MIN, false),
    ] {
        let got = run(Trilu { upper }, &[&x, &k_tensor(k)]).expect("run");
        check(&got, &trilu(&nd(&x), k, upper), Tol::of(DType::I64)).expect("matches");
    }
}

#[test]
fn k_known_only_at_run_time() {
    let kind = LayerKind::from(Trilu { upper: false });
    let symbolic = [
        BuildInput::new(DType::I16, &["b", "n", "m"]),
        BuildInput::new(DType::I64, &[]),
    ];
    assert_eq!(
        infer(&kind, &symbolic).expect("infer"),
        [(DType::I16, sym(&["b", "n", "m"]))]
    );
    let mut rng = Rng::new(2);
    let xs = [
        random(DType::I16, &[2, 3, 5], &mut rng, 1.0, 9.0),
        random(DType::I16, &[1, 6, 2], &mut rng, 1.0, 9.0),
    ];
    let ks = [k_tensor(-1), k_tensor(2)];
    let runs = vec![vec![&xs[0], &ks[0]], vec![&xs[1], &ks[1]]];
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    check(
        &got[0][0],
        &trilu(&nd(&xs[0]), -1, false),
        Tol::of(DType::I64),
    )
    .expect("k = -1");
    check(
        &got[1][0],
        &trilu(&nd(&xs[1]), 2, false),
        Tol::of(DType::I64),
    )
    .expect("k = 2");
}

#[test]
fn large_matrices_on_both_backends() {
    let mut rng = Rng::new(3);
    let x = random(DType::F64, &[3, 200, 150], &mut rng, 1.0, 2.0);
    let want = trilu(&nd(&x), 7, true);
    for backend in [global(), support::pooled()] {
        let got = run_on(backend, Trilu { upper: true }, &[&x, &k_tensor(7)]).expect("run");
        check(&got[0], &want, Tol::of(DType::I64)).expect("matches");
    }
}

#[test]
fn bad_inputs_are_errors() {
    let kind = LayerKind::from(Trilu { upper: true });
    assert!(infer(&kind, &[BuildInput::new(DType::F32, &["n"])]).is_err());
    let float_k = [
        BuildInput::new(DType::F32, &["n", "n"]),
        BuildInput::new(DType::F32, &[]),
    ];
    assert!(infer(&kind, &float_k).is_err());
    let many_k = [
        BuildInput::new(DType::F32, &["n", "n"]),
        BuildInput::new(DType::I64, &["2"]),
    ];
    assert!(infer(&kind, &many_k).is_err());
}

#[test]
fn engine_round_trip_with_k_as_an_input() {
    let inputs = [
        (
            "x",
            DType::F16,
            vec![Dim::dynamic("n", 1, 3, 5), Dim::Fixed(4)],
        ),
        ("k", DType::I64, vec![]),
    ];
    let mut rng = Rng::new(15);
    let x = random(DType::F16, &[5, 4], &mut rng, 1.0, 2.0);
    let ks = [k_tensor(-2), k_tensor(1)];
    let runs = vec![vec![&x, &ks[0]], vec![&x, &ks[1]]];
    let got = run_engine(Trilu { upper: true }.into(), &inputs, &runs).expect("engine");
    for (k, out) in [-2, 1].iter().zip(&got) {
        check(&out[0], &trilu(&nd(&x), *k, true), Tol::of(DType::I64)).expect("matches");
    }
}
