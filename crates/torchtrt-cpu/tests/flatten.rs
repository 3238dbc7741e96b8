//! Flatten: random ranks and axes (negative too) for every dtype, symbolic products in the
//! shape rule, and one kernel run on several dynamic shapes.

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
use torchtrt_core::layers::Flatten;
use torchtrt_core::plugin_api::{DType, DimExpr};

use harness::{infer_one, run_prepared, sym};
use support::{Rng, random, run};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn matches_reference(
        shape in prop::collection::vec(0usize..=4, 0..=4),
        pick: u64,
        negative: bool,
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -50.0, 50.0);
        let axis = (pick % (shape.len() as u64 + 1)) as usize;
        let layer_axis = if negative && axis < shape.len() {
            axis as i64 - shape.len() as i64
        } else {
            axis as i64
        };
        let got = run(Flatten { axis: layer_axis }, &[&x])?;
        let rows: usize = shape[..axis].iter().product();
        let cols: usize = shape[axis..].iter().product();
        prop_assert_eq!(got.shape(), &[rows, cols]);
        prop_assert_eq!(got.bytes(), x.bytes());
    }
}

#[test]
fn shape_rule_multiplies_symbolic_dims() {
    let x = || (DType::F32, sym(&["n", "3", "h", "4"]), None);
    let ts = infer_one(Flatten { axis: 2 }, &[x()]).unwrap();
    let n = DimExpr::sym("n");
    let h = DimExpr::sym("h");
    assert_eq!(ts.shape, vec![n.clone() * 3, h * 4]);
    let ts = infer_one(Flatten { axis: 0 }, &[x()]).unwrap();
    assert_eq!(ts.shape[0], DimExpr::Const(1));
    let ts = infer_one(Flatten { axis: -4 }, &[x()]).unwrap();
    assert_eq!(ts.shape[0], DimExpr::Const(1));
    let ts = infer_one(Flatten { axis: 4 }, &[x()]).unwrap();
    assert_eq!(ts.shape[1], DimExpr::Const(1));
    let err = infer_one(Flatten { axis: 5 }, &[x()]).unwrap_err();
    assert!(err.contains("axis 5"), "{err}");
}

#[test]
fn one_kernel_for_many_shapes() {
    let mut rng = Rng::new(4);
    let a = random(DType::I8, &[2, 3, 5], &mut rng, -100.0, 100.0);
    let b = random(DType::I8, &[7, 3, 1], &mut rng, -100.0, 100.0);
    let symbolic = [(DType::I8, sym(&["n", "3", "w"]), None)];
    let outs = run_prepared(Flatten { axis: -1 }, &symbolic, &[vec![&a], vec![&b]]).unwrap();
    assert_eq!(outs[0].shape(), [6, 5]);
    assert_eq!(outs[1].shape(), [21, 1]);
    assert_eq!(outs[0].bytes(), a.bytes());
    assert_eq!(outs[1].bytes(), b.bytes());
}
