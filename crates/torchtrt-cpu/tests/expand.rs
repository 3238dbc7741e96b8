//! Expand: random broadcastable shape pairs for every dtype, shape rules with known and
//! unknown shape values, and a target shape computed at run time.

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
use torchtrt_core::layers::{Expand, Shape, unknown_dim};
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{Dim, NetworkDefinition};

use harness::{compile, execute, infer_one, ints, run_prepared, sym};
use reference::Nd;
use support::{Rng, Tol, broadcast_pair, check, global, nd, random, run, run_on};

/// `x` read at every index of `shape`, right-aligned, dims of 1 repeated.
fn broadcast_to(x: &Nd, shape: &[usize]) -> Nd {
    let lead = shape.len() - x.shape.len();
    Nd::from_fn(shape.to_vec(), |idx| {
        let src: Vec<usize> = x
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
            .collect();
        x.at(&src)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        (a, b) in broadcast_pair(4),
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let x = random(dtype, &a, &mut Rng::new(seed), -100.0, 100.0);
        let target: Vec<i64> = b.iter().map(|&d| d as i64).collect();
        let got = run(Expand, &[&x, &ints(&target)])?;
        let rank = a.len().max(b.len());
        let out: Vec<usize> = (0..rank)
            .map(|i| {
                let da = (i + a.len()).checked_sub(rank).map_or(1, |j| a[j]);
                let db = (i + b.len()).checked_sub(rank).map_or(1, |j| b[j]);
                da.max(db)
            })
            .collect();
        check(&got, &broadcast_to(&nd(&x), &out), Tol::of(DType::I64))?;
    }
}

#[test]
fn shape_rules() {
    let x = || (DType::F32, sym(&["3", "1", "n"]), None);
    let target = ints(&[2, 1, 4, 1]);
    let ts = infer_one(Expand, &[x(), (DType::I64, sym(&["4"]), Some(&target))]).unwrap();
    let n = DimExpr::sym("n");
    assert_eq!(
        ts.shape,
        vec![DimExpr::Const(2), DimExpr::Const(3), DimExpr::Const(4), n]
    );
    let ts = infer_one(Expand, &[x(), (DType::I64, sym(&["4"]), None)]).unwrap();
    let u = unknown_dim();
    assert_eq!(ts.shape, vec![u.clone(), DimExpr::Const(3), u.clone(), u]);
    let bad = ints(&[2, 1, 1]);
    let err = infer_one(Expand, &[x(), (DType::I64, sym(&["3"]), Some(&bad))]).unwrap_err();
    assert!(err.contains("broadcast"), "{err}");
    let negative = ints(&[-1]);
    let err = infer_one(Expand, &[x(), (DType::I64, sym(&["1"]), Some(&negative))]).unwrap_err();
    assert!(err.contains("negative"), "{err}");
    let err = infer_one(Expand, &[x(), (DType::I64, sym(&["k"]), None)]).unwrap_err();
    assert!(err.contains("known at build time"), "{err}");
}

#[test]
fn incompatible_shapes_are_errors() {
    let x = random(DType::F32, &[3], &mut Rng::new(1), -1.0, 1.0);
    let err = run_on(global(), Expand, &[&x, &ints(&[2, 4])]).unwrap_err();
    assert!(err.contains("broadcast"), "{err}");
}

#[test]
fn prepared_without_the_shape_value() {
    let mut rng = Rng::new(6);
    let x = random(DType::F16, &[1, 3], &mut rng, -1.0, 1.0);
    let symbolic = [
        (DType::F16, sym(&["1", "3"]), None),
        (DType::I64, sym(&["3"]), None),
    ];
    let (s1, s2) = (ints(&[2, 4, 1]), ints(&[1, 1, 3]));
    let outs = run_prepared(Expand, &symbolic, &[vec![&x, &s1], vec![&x, &s2]]).unwrap();
    check(
        &outs[0],
        &broadcast_to(&nd(&x), &[2, 4, 3]),
        Tol::of(DType::F16),
    )
    .unwrap();
    check(
        &outs[1],
        &broadcast_to(&nd(&x), &[1, 1, 3]),
        Tol::of(DType::F16),
    )
    .unwrap();
}

#[test]
fn target_shape_from_another_input() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::I32, &[Dim::Fixed(1), Dim::Fixed(3)])
        .unwrap();
    let like = net
        .add_input(
            "like",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 8), Dim::Fixed(1)],
        )
        .unwrap();
    let shape = net.add("shape", Shape::default(), &[like]).unwrap();
    let y = net.add("expand", Expand, &[x, shape]).unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let mut rng = Rng::new(3);
    let xv = random(DType::I32, &[1, 3], &mut rng, -9.0, 9.0);
    for n in [1, 5] {
        let likev = random(DType::F32, &[n, 1], &mut rng, -1.0, 1.0);
        let out = execute(&engine, &[&xv, &likev]).unwrap().remove(0);
        check(&out, &broadcast_to(&nd(&xv), &[n, 3]), Tol::of(DType::I32)).unwrap();
    }
}
