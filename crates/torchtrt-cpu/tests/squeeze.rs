//! Squeeze: axes from the field or from an input tensor, or every dim of size 1; symbolic
//! shape rules, and axes known only at run time.

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
use torchtrt_core::layers::{Squeeze, unknown_dim};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Dim, NetworkDefinition};

use harness::{compile, execute, infer_one, ints, run_prepared, sym};
use support::{Rng, random, run};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        shape in prop::collection::vec(prop::sample::select(vec![1usize, 1, 2, 3]), 0..=5),
        dtype in select(DType::ALL.to_vec()),
        mode in 0u8..3,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -50.0, 50.0);
        let ones: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] == 1).collect();
        let chosen: Vec<usize> = ones.iter().copied().filter(|_| rng.coin()).collect();
        let axes: Vec<i64> = chosen
            .iter()
            .map(|&a| if rng.coin() { a as i64 - shape.len() as i64 } else { a as i64 })
            .collect();
        let (got, removed) = match mode {
            0 => (run(Squeeze { axes: None }, &[&x])?, ones),
            1 => (run(Squeeze { axes: Some(axes) }, &[&x])?, chosen),
            _ => (run(Squeeze { axes: None }, &[&x, &ints(&axes)])?, chosen),
        };
        let want: Vec<usize> = (0..shape.len())
            .filter(|d| !removed.contains(d))
            .map(|d| shape[d])
            .collect();
        prop_assert_eq!(got.shape(), want.as_slice());
        prop_assert_eq!(got.bytes(), x.bytes());
    }
}

#[test]
fn shape_rules() {
    let x = || (DType::F32, sym(&["n", "1", "h", "1"]), None);
    let ts = infer_one(
        Squeeze {
            axes: Some(vec![1, -1]),
        },
        &[x()],
    )
    .unwrap();
    assert_eq!(ts.shape, sym(&["n", "h"]));
    let ts = infer_one(
        Squeeze {
            axes: Some(vec![0]),
        },
        &[x()],
    )
    .unwrap();
    assert_eq!(
        ts.shape,
        sym(&["1", "h", "1"]),
        "a symbolic dim may be squeezed"
    );
    let err = infer_one(Squeeze { axes: None }, &[x()]).unwrap_err();
    assert!(err.contains("without axes"), "{err}");
    let err = infer_one(
        Squeeze {
            axes: Some(vec![1, 1]),
        },
        &[x()],
    )
    .unwrap_err();
    assert!(err.contains("repeated"), "{err}");
    let fixed = || (DType::F32, sym(&["2", "1", "3"]), None);
    let ts = infer_one(Squeeze { axes: None }, &[fixed()]).unwrap();
    assert_eq!(ts.shape, sym(&["2", "3"]));
    let err = infer_one(
        Squeeze {
            axes: Some(vec![0]),
        },
        &[fixed()],
    )
    .unwrap_err();
    assert!(err.contains("not 1"), "{err}");
    let err = infer_one(
        Squeeze {
            axes: Some(vec![3]),
        },
        &[fixed()],
    )
    .unwrap_err();
    assert!(err.contains("out of range"), "{err}");
    let ts = infer_one(Squeeze { axes: Some(vec![]) }, &[fixed()]).unwrap();
    assert_eq!(ts.shape, sym(&["2", "1", "3"]));

    let axes = ints(&[-3]);
    let ts = infer_one(
        Squeeze { axes: None },
        &[x(), (DType::I64, sym(&["1"]), Some(&axes))],
    )
    .unwrap();
    assert_eq!(ts.shape, sym(&["n", "h", "1"]));
    let ts = infer_one(
        Squeeze { axes: None },
        &[x(), (DType::I32, sym(&["2"]), None)],
    )
    .unwrap();
    assert_eq!(ts.shape, vec![unknown_dim(); 2]);
    let err = infer_one(
        Squeeze { axes: None },
        &[fixed(), (DType::I64, sym(&["4"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("more axes"), "{err}");
    let err = infer_one(
        Squeeze { axes: None },
        &[x(), (DType::F32, sym(&["1"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("integer"), "{err}");
}

#[test]
fn prepared_for_symbolic_dims() {
    let mut rng = Rng::new(8);
    let a = random(DType::F64, &[4, 1, 2], &mut rng, -1.0, 1.0);
    let b = random(DType::F64, &[1, 1, 5], &mut rng, -1.0, 1.0);
    let symbolic = [(DType::F64, sym(&["n", "1", "w"]), None)];
    let layer = Squeeze {
        axes: Some(vec![1]),
    };
    let outs = run_prepared(layer, &symbolic, &[vec![&a], vec![&b]]).unwrap();
    assert_eq!(outs[0].shape(), [4, 2]);
    assert_eq!(outs[1].shape(), [1, 5]);
    assert_eq!(outs[1].bytes(), b.bytes());
}

#[test]
fn axes_computed_at_run_time() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::U8,
            &[Dim::Fixed(1), Dim::Fixed(4), Dim::Fixed(1)],
        )
        .unwrap();
    let axes = net.add_input("axes", DType::I64, &[Dim::Fixed(2)]).unwrap();
    let y = net
        .add("squeeze", Squeeze { axes: None }, &[x, axes])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let input = random(DType::U8, &[1, 4, 1], &mut Rng::new(2), 0.0, 200.0);
    let out = execute(&engine, &[&input, &ints(&[0, -1])])
        .unwrap()
        .remove(0);
    assert_eq!(out.shape(), [4]);
    assert_eq!(out.bytes(), input.bytes());
    let out = execute(&engine, &[&input, &ints(&[2, 0])])
        .unwrap()
        .remove(0);
    assert_eq!(out.shape(), [4]);
    let err = execute(&engine, &[&input, &ints(&[0, 1])]).unwrap_err();
    assert!(err.contains("not 1"), "{err}");
}
