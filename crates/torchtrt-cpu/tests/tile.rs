//! Tile: random shapes and repeats (zeros too) for every dtype, shape rules with known and
//! unknown repeats, and repeats given at run time.

#[allow(dead_code)]
mod harness;
#[allow(dead_code)]
#[path = "reference/mod.rs"]
mod reference;
#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::{Tile, unknown_dim};
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{Dim, NetworkDefinition};

use harness::{compile, execute, infer_one, ints, run_prepared, sym};
use reference::Nd;
use support::{Rng, Tol, check, global, nd, random, run, run_on};

/// `x` repeated `repeats[d]` times along each dim `d`.
fn tile(x: &Nd, repeats: &[usize]) -> Nd {
    let shape = x.shape.iter().zip(repeats).map(|(&d, &r)| d * r).collect();
    Nd::from_fn(shape, |idx| {
        let src: Vec<usize> = idx.iter().zip(&x.shape).map(|(&i, &d)| i % d).collect();
        x.at(&src)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        shape in prop::collection::vec(0usize..=4, 0..=4),
        repeats_seed: u64,
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let mut rng = Rng::new(repeats_seed);
        let repeats: Vec<usize> = shape.iter().map(|_| rng.int(0, 3) as usize).collect();
        let x = random(dtype, &shape, &mut Rng::new(seed), -100.0, 100.0);
        let r: Vec<i64> = repeats.iter().map(|&r| r as i64).collect();
        let got = run(Tile, &[&x, &ints(&r)])?;
        check(&got, &tile(&nd(&x), &repeats), Tol::of(DType::I64))?;
    }
}

#[test]
fn shape_rules() {
    let x = || (DType::F32, sym(&["n", "3"]), None);
    let r = ints(&[2, 1]);
    let ts = infer_one(Tile, &[x(), (DType::I64, sym(&["2"]), Some(&r))]).unwrap();
    assert_eq!(ts.shape, vec![DimExpr::sym("n") * 2, DimExpr::Const(3)]);
    let ts = infer_one(Tile, &[x(), (DType::I32, sym(&["2"]), None)]).unwrap();
    assert_eq!(ts.shape, vec![unknown_dim(), unknown_dim()]);
    let short = ints(&[2]);
    let err = infer_one(Tile, &[x(), (DType::I64, sym(&["1"]), Some(&short))]).unwrap_err();
    assert!(err.contains("1 entries"), "{err}");
    let err = infer_one(Tile, &[x(), (DType::I64, sym(&["3"]), None)]).unwrap_err();
    assert!(err.contains("3 entries"), "{err}");
    let negative = ints(&[1, -2]);
    let err = infer_one(Tile, &[x(), (DType::I64, sym(&["2"]), Some(&negative))]).unwrap_err();
    assert!(err.contains("negative"), "{err}");
}

#[test]
fn bad_repeats_at_run_time_are_errors() {
    let x = random(DType::F32, &[2, 2], &mut Rng::new(1), -1.0, 1.0);
    let err = run_on(global(), Tile, &[&x, &ints(&[1, -1])]).unwrap_err();
    assert!(err.contains("negative"), "{err}");
}

#[test]
fn prepared_for_symbolic_dims() {
    let mut rng = Rng::new(6);
    let a = random(DType::BF16, &[2, 3], &mut rng, -1.0, 1.0);
    let b = random(DType::BF16, &[5, 3], &mut rng, -1.0, 1.0);
    let r = ints(&[3, 2]);
    let symbolic = [
        (DType::BF16, sym(&["n", "3"]), None),
        (DType::I64, sym(&["2"]), Some(&r)),
    ];
    let outs = run_prepared(Tile, &symbolic, &[vec![&a, &r], vec![&b, &r]]).unwrap();
    check(&outs[0], &tile(&nd(&a), &[3, 2]), Tol::of(DType::BF16)).unwrap();
    check(&outs[1], &tile(&nd(&b), &[3, 2]), Tol::of(DType::BF16)).unwrap();
}

#[test]
fn repeats_given_at_run_time() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::I16, &[Dim::Fixed(2), Dim::Fixed(3)])
        .unwrap();
    let r = net
        .add_input("repeats", DType::I64, &[Dim::Fixed(2)])
        .unwrap();
    let y = net.add("tile", Tile, &[x, r]).unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let xv = random(DType::I16, &[2, 3], &mut Rng::new(5), -99.0, 99.0);
    for reps in [[1, 1], [3, 2], [0, 4]] {
        let r: Vec<i64> = reps.iter().map(|&v| v as i64).collect();
        let out = execute(&engine, &[&xv, &ints(&r)]).unwrap().remove(0);
        check(&out, &tile(&nd(&xv), &reps), Tol::of(DType::I16)).unwrap();
    }
}
