//! SpaceToDepth against its index formula, every dtype, symbolic shapes and bad inputs.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::LayerKind;
use torchtrt_core::layers::SpaceToDepth;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;

use reference::Nd;
use support::{Rng, Tol, check, global, nd, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared};

/// `y[n, (i·b + j)·C + c, h, w] = x[n, c, h·b + i, w·b + j]`.
fn space_to_depth(x: &Nd, b: usize) -> Nd {
    let [n, c, h, w] = x.shape[..] else {
        unreachable!("rank 4")
    };
    Nd::from_fn(vec![n, c * b * b, h / b, w / b], |idx| {
        let (block, ch) = (idx[1] / c, idx[1] % c);
        let (i, j) = (block / b, block % b);
        x.at(&[idx[0], ch, idx[2] * b + i, idx[3] * b + j])
    })
}

fn any_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        (n, c, h, w) in (1usize..=2, 1usize..=4, 1usize..=3, 1usize..=3),
        b in 1usize..=3,
        dtype in any_dtype(),
        seed: u64,
    ) {
        let x = random(dtype, &[n, c, h * b, w * b], &mut Rng::new(seed), -50.0, 50.0);
        let got = run(SpaceToDepth { blocksize: b as i64 }, &[&x])?;
        check(&got, &space_to_depth(&nd(&x), b), Tol::of(DType::I64))?;
    }
}

#[test]
fn symbolic_shapes() {
    let kind = LayerKind::from(SpaceToDepth { blocksize: 2 });
    let symbolic = [BuildInput::new(DType::I32, &["n", "3", "h", "w"])];
    let out = infer(&kind, &symbolic).expect("infer");
    let bind = |s: &str| match s {
        "n" => Some(2),
        "h" => Some(6),
        "w" => Some(10),
        _ => None,
    };
    let dims: Vec<i64> = out[0]
        .1
        .iter()
        .map(|d| d.eval(&bind).expect("bound"))
        .collect();
    assert_eq!(dims, [2, 12, 3, 5]);
    let mut rng = Rng::new(1);
    let xs: Vec<_> = [[1, 3, 2, 2], [2, 3, 6, 10]]
        .iter()
        .map(|s| random(DType::I32, s, &mut rng, -9.0, 9.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x]).collect();
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    for (x, out) in xs.iter().zip(&got) {
        check(&out[0], &space_to_depth(&nd(x), 2), Tol::of(DType::I64)).expect("matches");
    }
}

#[test]
fn large_image_on_both_backends() {
    let mut rng = Rng::new(2);
    let x = random(DType::BF16, &[2, 5, 64, 48], &mut rng, -1.0, 1.0);
    let want = space_to_depth(&nd(&x), 4);
    for backend in [global(), support::pooled()] {
        let got = run_on(backend, SpaceToDepth { blocksize: 4 }, &[&x]).expect("run");
        check(&got[0], &want, Tol::of(DType::I64)).expect("matches");
    }
}

#[test]
fn bad_inputs_are_errors() {
    let layer = |b| LayerKind::from(SpaceToDepth { blocksize: b });
    let x = || BuildInput::new(DType::F32, &["1", "2", "4", "6"]);
    assert!(infer(&layer(0), &[x()]).is_err());
    assert!(infer(&layer(4), &[x()]).is_err());
    assert!(infer(&layer(i64::MAX), &[x()]).is_err());
    assert!(infer(&layer(2), &[BuildInput::new(DType::F32, &["2", "4", "6"])]).is_err());
    let mut rng = Rng::new(3);
    let t = random(DType::F32, &[1, 2, 3, 4], &mut rng, -1.0, 1.0);
    assert!(run_on(global(), layer(2), &[&t]).is_err());
}

#[test]
fn engine_round_trip_with_dynamic_batch() {
    let inputs = [(
        "x",
        DType::Bool,
        vec![
            Dim::dynamic("n", 1, 1, 3),
            Dim::Fixed(2),
            Dim::Fixed(6),
            Dim::Fixed(3),
        ],
    )];
    let mut rng = Rng::new(14);
    let xs: Vec<_> = [1, 3]
        .iter()
        .map(|&n| random(DType::Bool, &[n, 2, 6, 3], &mut rng, 0.0, 1.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x]).collect();
    let got = run_engine(SpaceToDepth { blocksize: 3 }.into(), &inputs, &runs).expect("engine");
    for (x, out) in xs.iter().zip(&got) {
        check(&out[0], &space_to_depth(&nd(x), 3), Tol::of(DType::I64)).expect("matches");
    }
}
