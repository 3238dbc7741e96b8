//! Unsqueeze: axes from the field or from an input tensor (negative ones index the output),
//! symbolic shape rules, and axes known only at run time.

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
use torchtrt_core::layers::{Unsqueeze, unknown_dim};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Dim, NetworkDefinition};

use harness::{compile, execute, infer_one, ints, sym};
use support::{Rng, random, run};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        shape in prop::collection::vec(1usize..=3, 0..=3),
        inserted in 1usize..=3,
        dtype in select(DType::ALL.to_vec()),
        as_input: bool,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -50.0, 50.0);
        let rank = shape.len() + inserted;
        let mut positions: Vec<usize> = (0..rank).collect();
        while positions.len() > inserted {
            positions.remove(rng.int(0, positions.len() as i64 - 1) as usize);
        }
        let axes: Vec<i64> = positions
            .iter()
            .rev()
            .map(|&a| if rng.coin() { a as i64 - rank as i64 } else { a as i64 })
            .collect();
        let got = if as_input {
            run(Unsqueeze::default(), &[&x, &ints(&axes)])?
        } else {
            run(Unsqueeze { axes }, &[&x])?
        };
        let mut dims = shape.iter();
        let want: Vec<usize> = (0..rank)
            .map(|d| if positions.contains(&d) { 1 } else { *dims.next().unwrap() })
            .collect();
        prop_assert_eq!(got.shape(), want.as_slice());
        prop_assert_eq!(got.bytes(), x.bytes());
    }
}

#[test]
fn shape_rules() {
    let x = || (DType::BF16, sym(&["n", "h"]), None);
    let ts = infer_one(Unsqueeze { axes: vec![0, -1] }, &[x()]).unwrap();
    assert_eq!(ts.shape, sym(&["1", "n", "h", "1"]));
    let ts = infer_one(Unsqueeze { axes: vec![1] }, &[x()]).unwrap();
    assert_eq!(ts.shape, sym(&["n", "1", "h"]));
    let err = infer_one(Unsqueeze { axes: vec![3] }, &[x()]).unwrap_err();
    assert!(err.contains("out of range"), "{err}");
    let err = infer_one(Unsqueeze { axes: vec![0, -4] }, &[x()]).unwrap_err();
    assert!(err.contains("repeated"), "{err}");
    let axes = ints(&[2]);
    let ts = infer_one(
        Unsqueeze::default(),
        &[x(), (DType::I64, sym(&["1"]), Some(&axes))],
    )
    .unwrap();
    assert_eq!(ts.shape, sym(&["n", "h", "1"]));
    let ts = infer_one(
        Unsqueeze::default(),
        &[x(), (DType::I64, sym(&["2"]), None)],
    )
    .unwrap();
    assert_eq!(ts.shape, vec![unknown_dim(); 4]);
    let err = infer_one(
        Unsqueeze::default(),
        &[x(), (DType::I64, sym(&["k"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("known at build time"), "{err}");
}

#[test]
fn axes_computed_at_run_time() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::Bool, &[Dim::dynamic("n", 1, 2, 4)])
        .unwrap();
    let axes = net.add_input("axes", DType::I32, &[Dim::Fixed(1)]).unwrap();
    let y = net
        .add("unsqueeze", Unsqueeze::default(), &[x, axes])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let input = random(DType::Bool, &[3], &mut Rng::new(2), 0.0, 1.0);
    let front = torchtrt_core::Tensor::from_vec(&[1], vec![0i32]).unwrap();
    let out = execute(&engine, &[&input, &front]).unwrap().remove(0);
    assert_eq!(out.shape(), [1, 3]);
    assert_eq!(out.bytes(), input.bytes());
    let back = torchtrt_core::Tensor::from_vec(&[1], vec![-1i32]).unwrap();
    let out = execute(&engine, &[&input, &back]).unwrap().remove(0);
    assert_eq!(out.shape(), [3, 1]);
}
