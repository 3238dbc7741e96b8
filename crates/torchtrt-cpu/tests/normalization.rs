//! Normalization over axes with optional broadcast scale and bias, against an f64
//! mean/variance reference; every float dtype, symbolic shapes, bad parameters.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::LayerKind;
use torchtrt_core::layers::Normalization;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;

use reference::normalization::normalize;
use support::{Rng, Tol, check, float_dtype, global, nd, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// A shape that broadcasts to `shape`: some leading dims dropped, some dims set to 1.
fn broadcastable(shape: &[usize], rng: &mut Rng) -> Vec<usize> {
    let drop = rng.int(0, shape.len() as i64) as usize;
    shape[drop..]
        .iter()
        .map(|&d| if rng.coin() { 1 } else { d })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn matches_reference(
        shape in proptest::collection::vec(1usize..=6, 1..=4),
        dtype in float_dtype(),
        inputs in 1usize..=3,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = shape.len();
        let mut axes: Vec<usize> = (0..rank).filter(|_| rng.coin()).collect();
        if axes.is_empty() {
            axes.push(rng.int(0, rank as i64 - 1) as usize);
        }
        let signed: Vec<i64> = axes.iter().map(|&a| if rng.coin() { a as i64 - rank as i64 } else { a as i64 }).collect();
        let eps = [1e-5, 1e-3, 0.1][rng.int(0, 2) as usize];
        let layer = Normalization { axes: signed, epsilon: eps as f32 };
        let x = random(dtype, &shape, &mut rng, -2.0, 2.0);
        let s = random(dtype, &broadcastable(&shape, &mut rng), &mut rng, 0.5, 1.5);
        let b = random(dtype, &broadcastable(&shape, &mut rng), &mut rng, -1.0, 1.0);
        let all = [&x, &s, &b];
        let got = run(layer, &all[..inputs])?;
        let (want, min_std) = normalize(
            &nd(&x),
            &axes,
            f64::from(eps as f32),
            (inputs > 1).then(|| nd(&s)).as_ref(),
            (inputs > 2).then(|| nd(&b)).as_ref(),
        );
        let amplification = 4.0 / min_std;
        check(&got, &want, Tol::of(dtype).scaled(amplification.max(4.0)))?;
    }
}

#[test]
fn layer_norm_prepared_for_symbolic_batch_and_length() {
    let kind = LayerKind::from(Normalization {
        axes: vec![-1],
        epsilon: 1e-5,
    });
    let symbolic = [
        BuildInput::new(DType::F32, &["b", "s", "8"]),
        BuildInput::new(DType::F32, &["8"]),
        BuildInput::new(DType::F32, &["8"]),
    ];
    let out = infer(&kind, &symbolic).expect("infer");
    assert_eq!(out[0], (DType::F32, sym(&["b", "s", "8"])));
    let mut rng = Rng::new(9);
    let s = random(DType::F32, &[8], &mut rng, 0.5, 1.5);
    let b = random(DType::F32, &[8], &mut rng, -1.0, 1.0);
    let xs: Vec<_> = [[1, 1, 8], [3, 5, 8], [2, 700, 8]]
        .iter()
        .map(|sh| random(DType::F32, sh, &mut rng, -2.0, 2.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x, &s, &b]).collect();
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    for (x, out) in xs.iter().zip(&got) {
        let (want, min_std) = normalize(&nd(x), &[2], 1e-5, Some(&nd(&s)), Some(&nd(&b)));
        check(&out[0], &want, Tol::of(DType::F32).scaled(4.0 / min_std)).expect("matches");
    }
}

#[test]
fn instance_norm_over_large_planes_on_both_backends() {
    let mut rng = Rng::new(4);
    let x = random(DType::F32, &[2, 3, 64, 48], &mut rng, -2.0, 2.0);
    let layer = Normalization {
        axes: vec![2, 3],
        epsilon: 1e-5,
    };
    let (want, min_std) = normalize(&nd(&x), &[2, 3], 1e-5, None, None);
    let tol = Tol::of(DType::F32).scaled(4.0 / min_std);
    check(&run(layer.clone(), &[&x]).expect("run"), &want, tol).expect("global");
    let got = run_on(support::pooled(), layer, &[&x]).expect("pooled");
    check(&got[0], &want, tol).expect("pooled");
}

#[test]
fn bad_parameters_are_errors() {
    let x = BuildInput::new(DType::F32, &["n", "4"]);
    let none = LayerKind::from(Normalization {
        axes: vec![],
        epsilon: 0.0,
    });
    assert!(infer(&none, &[x]).is_err());
    let twice = LayerKind::from(Normalization {
        axes: vec![1, -1],
        epsilon: 0.0,
    });
    assert!(infer(&twice, &[BuildInput::new(DType::F32, &["n", "4"])]).is_err());
    let ok = LayerKind::from(Normalization {
        axes: vec![1],
        epsilon: 1e-5,
    });
    let wrong_scale = [
        BuildInput::new(DType::F32, &["n", "4"]),
        BuildInput::new(DType::F32, &["3"]),
    ];
    let err = infer(&ok, &wrong_scale).expect_err("scale [3] vs [n,4]");
    assert!(err.contains("scale"), "{err}");
    let ints = [BuildInput::new(DType::I32, &["n", "4"])];
    assert!(infer(&ok, &ints).is_err());
    let mut rng = Rng::new(1);
    let xt = random(DType::F32, &[2, 4], &mut rng, -1.0, 1.0);
    let st = random(DType::F32, &[2, 3], &mut rng, -1.0, 1.0);
    assert!(run_on(global(), ok, &[&xt, &st]).is_err());
}

#[test]
fn engine_round_trip_with_dynamic_length() {
    let layer = Normalization {
        axes: vec![1, 2],
        epsilon: 1e-3,
    };
    let inputs = [
        (
            "x",
            DType::F32,
            vec![Dim::Fixed(2), Dim::dynamic("s", 1, 4, 8), Dim::Fixed(3)],
        ),
        ("scale", DType::F32, vec![Dim::Fixed(3)]),
    ];
    let mut rng = Rng::new(10);
    let s = random(DType::F32, &[3], &mut rng, 0.5, 1.5);
    let xs: Vec<_> = [1, 8]
        .iter()
        .map(|&n| random(DType::F32, &[2, n, 3], &mut rng, -2.0, 2.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x, &s]).collect();
    let got = run_engine(layer.into(), &inputs, &runs).expect("engine");
    for (x, out) in xs.iter().zip(&got) {
        let (want, min_std) = normalize(&nd(x), &[1, 2], f64::from(1e-3f32), Some(&nd(&s)), None);
        check(&out[0], &want, Tol::of(DType::F32).scaled(4.0 / min_std)).expect("matches");
    }
}
