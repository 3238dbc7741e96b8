//! ConstantOfShape: random shapes and fill values of every dtype, shape rules with known and
//! unknown shape values, and a shape computed at run time from a dynamic input.

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
use torchtrt_core::layers::{ConstantOfShape, Shape, unknown_dim};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Dim, NetworkDefinition, Tensor};

use harness::{compile, execute, infer_one, ints, kinds, sym};
use support::{Rng, random, run};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn fills_every_element(
        dims in prop::collection::vec(0i64..=5, 0..=4),
        dtype in select(DType::ALL.to_vec()),
        wide: bool,
        seed: u64,
    ) {
        let value = random(dtype, &[1], &mut Rng::new(seed), -50.0, 50.0);
        let layer = ConstantOfShape::from_tensor(&value).unwrap();
        let shape = if wide {
            ints(&dims)
        } else {
            Tensor::from_vec(&[dims.len()], dims.iter().map(|&d| d as i32).collect()).unwrap()
        };
        let got = run(layer, &[&shape])?;
        let want: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        prop_assert_eq!(got.shape(), want.as_slice());
        prop_assert_eq!(got.dtype(), dtype);
        for chunk in got.bytes().chunks_exact(dtype.size()) {
            prop_assert_eq!(chunk, value.bytes());
        }
    }
}

#[test]
fn shape_rules() {
    let layer = ConstantOfShape::new(7i32);
    let known = ints(&[2, 0, 3]);
    let ts = infer_one(layer.clone(), &[(DType::I64, sym(&["3"]), Some(&known))]).unwrap();
    assert_eq!((ts.dtype, ts.shape), (DType::I32, sym(&["2", "0", "3"])));
    let ts = infer_one(layer.clone(), &[(DType::I64, sym(&["2"]), None)]).unwrap();
    assert_eq!(ts.shape, vec![unknown_dim(), unknown_dim()]);
    let scalar = infer_one(
        ConstantOfShape::default(),
        &[(DType::I64, sym(&["0"]), Some(&ints(&[])))],
    )
    .unwrap();
    assert_eq!((scalar.dtype, scalar.shape), (DType::F32, vec![]));

    let err = infer_one(layer.clone(), &[(DType::I64, sym(&["n"]), None)]).unwrap_err();
    assert!(err.contains("known at build time"), "{err}");
    let negative = ints(&[2, -1]);
    let err = infer_one(layer.clone(), &[(DType::I64, sym(&["2"]), Some(&negative))]).unwrap_err();
    assert!(err.contains("negative"), "{err}");
    let err = infer_one(layer, &[(DType::F32, sym(&["2"]), None)]).unwrap_err();
    assert!(err.contains("integer"), "{err}");
    let broken = ConstantOfShape {
        dtype: DType::F64,
        value: vec![0; 3],
    };
    let err = infer_one(broken, &[(DType::I64, sym(&["1"]), Some(&ints(&[1])))]).unwrap_err();
    assert!(err.contains("3 bytes"), "{err}");
    assert!(ConstantOfShape::from_tensor(&ints(&[1, 2])).is_err());
}

#[test]
fn shape_from_a_dynamic_input_at_run_time() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F16,
            &[Dim::dynamic("n", 1, 2, 8), Dim::Fixed(3)],
        )
        .unwrap();
    let shape = net.add("shape", Shape::default(), &[x]).unwrap();
    let fill = net
        .add(
            "fill",
            ConstantOfShape::new(half::bf16::from_f32(1.5)),
            &[shape],
        )
        .unwrap();
    net.mark_output(fill, "y").unwrap();
    let engine = compile(&net).unwrap();
    assert_eq!(kinds(&engine), ["Shape", "ConstantOfShape"]);
    for n in [1, 6] {
        let input = random(DType::F16, &[n, 3], &mut Rng::new(9), -1.0, 1.0);
        let out = execute(&engine, &[&input]).unwrap().remove(0);
        assert_eq!(out.shape(), [n, 3]);
        assert!(
            out.as_slice::<half::bf16>()
                .unwrap()
                .iter()
                .all(|v| v.to_f32() == 1.5)
        );
    }
}

#[test]
fn static_shapes_fold() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::Fixed(2), Dim::Fixed(3)])
        .unwrap();
    let shape = net.add("shape", Shape::default(), &[x]).unwrap();
    let fill = net
        .add("fill", ConstantOfShape::new(4i64), &[shape])
        .unwrap();
    net.mark_output(fill, "y").unwrap();
    let engine = compile(&net).unwrap();
    assert_eq!(kinds(&engine), ["Constant"]);
    let input = random(DType::F32, &[2, 3], &mut Rng::new(1), -1.0, 1.0);
    let out = execute(&engine, &[&input]).unwrap().remove(0);
    assert_eq!(out.as_slice::<i64>().unwrap(), &[4; 6]);
}
