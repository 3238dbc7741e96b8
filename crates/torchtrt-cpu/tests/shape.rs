//! Shape and Size: the dims (or their product) of random inputs of every dtype, shape rules
//! on symbolic inputs, folding of known dims, and run-time values for dynamic dims.

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
use torchtrt_core::layers::{Shape, Size, unknown_dim};
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{Dim, NetworkDefinition, Tensor};

use harness::{compile, execute, infer_one, kinds, run_prepared, sym};
use support::{Rng, random, run};

/// ONNX `Shape-15`: dims `start..end`, negatives from the end, clamped to `[0, rank]`.
fn reference_dims(shape: &[usize], start: i64, end: Option<i64>) -> Vec<i64> {
    let r = shape.len() as i64;
    let fix = |v: i64| {
        let v = if v < 0 { v + r } else { v };
        v.max(0).min(r)
    };
    let (s, e) = (fix(start), fix(end.unwrap_or(r)));
    (s..e).map(|i| shape[i as usize] as i64).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn shape_matches_reference(
        shape in prop::collection::vec(0usize..=5, 0..=4),
        start in -6i64..=6,
        end in prop::option::of(-6i64..=6),
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -9.0, 9.0);
        let got = run(Shape { start, end }, &[&x])?;
        let want = reference_dims(&shape, start, end);
        prop_assert_eq!(got.shape(), &[want.len()]);
        prop_assert_eq!(got.as_slice::<i64>().unwrap(), want.as_slice());
    }

    #[test]
    fn size_matches_reference(
        shape in prop::collection::vec(0usize..=5, 0..=4),
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -9.0, 9.0);
        let got = run(Size, &[&x])?;
        prop_assert_eq!(got.shape(), &[] as &[usize]);
        prop_assert_eq!(got.as_slice::<i64>().unwrap(), &[shape.iter().product::<usize>() as i64]);
    }
}

#[test]
fn shape_rules_on_symbolic_inputs() {
    let x = || (DType::F16, sym(&["n", "3", "h"]), None);
    let all = infer_one(Shape::default(), &[x()]).unwrap();
    assert_eq!((all.dtype, all.shape), (DType::I64, sym(&["3"])));
    let tail = infer_one(
        Shape {
            start: -2,
            end: Some(100),
        },
        &[x()],
    )
    .unwrap();
    assert_eq!(tail.shape, sym(&["2"]));
    let empty = infer_one(
        Shape {
            start: 2,
            end: Some(1),
        },
        &[x()],
    )
    .unwrap();
    assert_eq!(empty.shape, sym(&["0"]));
    let size = infer_one(Size, &[x()]).unwrap();
    assert_eq!((size.dtype, size.shape), (DType::I64, vec![]));
}

#[test]
fn known_dims_evaluate_without_values() {
    use torchtrt_core::{InferInput, LayerOp};
    let shape = sym(&["n", "3", "4"]);
    let input = [InferInput {
        dtype: DType::F32,
        shape: &shape,
        value: None,
    }];
    let middle = Shape {
        start: 1,
        end: None,
    };
    let v = middle.eval_from_shapes(&input).unwrap();
    assert_eq!(v[0].as_slice::<i64>().unwrap(), &[3, 4]);
    assert!(Shape::default().eval_from_shapes(&input).is_none());
    assert!(Size.eval_from_shapes(&input).is_none());
    let fixed = sym(&["2", "3", "4"]);
    let input = [InferInput {
        dtype: DType::F32,
        shape: &fixed,
        value: None,
    }];
    assert_eq!(
        Size.eval_from_shapes(&input).unwrap()[0],
        Tensor::scalar(24i64)
    );
    let unknown = [unknown_dim(), DimExpr::Const(2)];
    let input = [InferInput {
        dtype: DType::F32,
        shape: &unknown,
        value: None,
    }];
    assert!(Size.eval_from_shapes(&input).is_none());
}

#[test]
fn prepared_for_symbolic_dims_runs_on_each_shape() {
    let mut rng = Rng::new(3);
    let a = random(DType::BF16, &[2, 7, 1], &mut rng, -1.0, 1.0);
    let b = random(DType::BF16, &[5, 7, 0], &mut rng, -1.0, 1.0);
    let symbolic = [(DType::BF16, sym(&["n", "7", "w"]), None)];
    let outs = run_prepared(Shape::default(), &symbolic, &[vec![&a], vec![&b]]).unwrap();
    assert_eq!(outs[0].as_slice::<i64>().unwrap(), &[2, 7, 1]);
    assert_eq!(outs[1].as_slice::<i64>().unwrap(), &[5, 7, 0]);
    let outs = run_prepared(Size, &symbolic, &[vec![&a], vec![&b]]).unwrap();
    assert_eq!(outs[0].as_slice::<i64>().unwrap(), &[14]);
    assert_eq!(outs[1].as_slice::<i64>().unwrap(), &[0]);
}

#[test]
fn static_dims_fold_and_dynamic_dims_run() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 8), Dim::Fixed(3)],
        )
        .unwrap();
    let tail = net
        .add(
            "tail",
            Shape {
                start: 1,
                end: None,
            },
            &[x],
        )
        .unwrap();
    let all = net.add("all", Shape::default(), &[x]).unwrap();
    let size = net.add("size", Size, &[x]).unwrap();
    net.mark_output(tail, "tail").unwrap();
    net.mark_output(all, "all").unwrap();
    net.mark_output(size, "size").unwrap();
    let engine = compile(&net).unwrap();
    assert_eq!(kinds(&engine), ["Constant", "Shape", "Size"]);
    for n in [1, 5] {
        let input = random(DType::F32, &[n, 3], &mut Rng::new(n as u64), -1.0, 1.0);
        let outs = execute(&engine, &[&input]).unwrap();
        assert_eq!(outs[0].as_slice::<i64>().unwrap(), &[3]);
        assert_eq!(outs[1].as_slice::<i64>().unwrap(), &[n as i64, 3]);
        assert_eq!(outs[2].as_slice::<i64>().unwrap(), &[3 * n as i64]);
    }
}
