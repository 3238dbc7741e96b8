//! Slice with its parameters as input tensors (ONNX-10): the same results as with fields on
//! random slices, defaults for absent axes and steps, shape rules with unknown values,
//! extreme steps, and starts given at run time.

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
use torchtrt_core::layers::{Slice, unknown_dim};
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{Dim, NetworkDefinition, Tensor};

use harness::{compile, execute, infer_one, ints, run_prepared, sym};
use reference::movement::{select as take, slice_positions};
use support::{Rng, Tol, check, nd, random, run, shape};

/// `values` as a 1-D tensor of `i64`, or of `i32` clamped to its range.
fn index_tensor(values: &[i64], wide: bool) -> Tensor {
    if wide {
        ints(values)
    } else {
        let narrow = |v: i64| v.clamp(i32::MIN.into(), i32::MAX.into()) as i32;
        Tensor::from_vec(&[values.len()], values.iter().map(|&v| narrow(v)).collect()).unwrap()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn inputs_match_reference(
        shape in shape(4, 6),
        dtype in select(DType::ALL.to_vec()),
        wide: bool,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -100.0, 100.0);
        let rank = shape.len() as i64;
        let leading = rng.coin();
        let (mut starts, mut ends, mut axes, mut steps) = (vec![], vec![], vec![], vec![]);
        let mut positions: Vec<Vec<usize>> = shape.iter().map(|&n| (0..n).collect()).collect();
        for axis in 0..rank {
            if !leading && rng.coin() {
                continue;
            }
            let n = shape[axis as usize] as i64;
            let step = if rng.coin() { rng.int(1, 3) } else { -rng.int(1, 3) };
            let start = if rng.int(0, 5) == 0 { i64::MIN } else { rng.int(-n - 2, n + 2) };
            let end = if rng.int(0, 5) == 0 { i64::MAX } else { rng.int(-n - 2, n + 2) };
            axes.push(if rng.coin() { axis - rank } else { axis });
            starts.push(start);
            ends.push(end);
            steps.push(step);
            positions[axis as usize] = slice_positions(n as usize, start, end, step);
        }
        let want = take(&nd(&x), &positions);
        let fields = Slice { starts: starts.clone(), ends: ends.clone(), axes: axes.clone(), steps: steps.clone() };
        check(&run(fields, &[&x])?, &want, Tol::of(DType::I64))?;

        let (s, e, a, st) = (
            index_tensor(&starts, wide),
            index_tensor(&ends, wide),
            index_tensor(&axes, wide),
            index_tensor(&steps, wide),
        );
        check(&run(Slice::default(), &[&x, &s, &e, &a, &st])?, &want, Tol::of(DType::I64))?;
        let from_ends = Slice { axes: axes.clone(), steps: steps.clone(), ..Slice::default() };
        check(&run(from_ends, &[&x, &s, &e])?, &want, Tol::of(DType::I64))?;
        if leading && steps.iter().all(|&s| s == 1) {
            check(&run(Slice::default(), &[&x, &s, &e])?, &want, Tol::of(DType::I64))?;
        }
    }
}

#[test]
fn shape_rules_with_unknown_values() {
    let x = || (DType::F32, sym(&["n", "8", "5"]), None);
    let starts = ints(&[1]);
    let ends = ints(&[-1]);
    let axes = ints(&[1]);
    let known = |t| (DType::I64, sym(&["1"]), Some(t));
    let unknown = || (DType::I64, sym(&["1"]), None);
    let ts = infer_one(
        Slice::default(),
        &[x(), known(&starts), known(&ends), known(&axes)],
    )
    .unwrap();
    assert_eq!(ts.shape, sym(&["n", "6", "5"]));
    let ts = infer_one(
        Slice::default(),
        &[x(), unknown(), known(&ends), known(&axes)],
    )
    .unwrap();
    let u = unknown_dim();
    assert_eq!(
        ts.shape,
        vec![DimExpr::sym("n"), u.clone(), DimExpr::Const(5)]
    );
    let ts = infer_one(Slice::default(), &[x(), known(&starts), unknown()]).unwrap();
    assert_eq!(
        ts.shape,
        vec![u.clone(), DimExpr::Const(8), DimExpr::Const(5)]
    );
    let ts = infer_one(
        Slice::default(),
        &[x(), known(&starts), known(&ends), unknown()],
    )
    .unwrap();
    assert_eq!(ts.shape, vec![u.clone(), u.clone(), u]);
    let err = infer_one(
        Slice::default(),
        &[x(), known(&starts), (DType::F32, sym(&["1"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("integer"), "{err}");
    let two = ints(&[0, 1]);
    let err = infer_one(Slice::default(), &[x(), known(&starts), known(&two)]).unwrap_err();
    assert!(err.contains("equal lengths"), "{err}");
}

#[test]
fn extreme_steps_and_empty_dims() {
    let mut rng = Rng::new(4);
    let x = random(DType::F32, &[5, 0], &mut rng, -1.0, 1.0);
    for step in [i64::MIN, i64::MAX, -1, 1] {
        let layer = Slice {
            starts: vec![i64::MAX, 0],
            ends: vec![i64::MIN, i64::MAX],
            axes: vec![0, 1],
            steps: vec![step, step],
        };
        let got = run(layer, &[&x]).unwrap();
        let first = slice_positions(5, i64::MAX, i64::MIN, step).len();
        assert_eq!(got.shape(), [first, 0], "step {step}");
    }
    let y = random(DType::I8, &[6], &mut rng, -9.0, 9.0);
    let layer = Slice {
        starts: vec![-1],
        ends: vec![i64::MIN],
        axes: vec![0],
        steps: vec![i64::MIN],
    };
    let got = run(layer, &[&y]).unwrap();
    assert_eq!(
        got.as_slice::<i8>().unwrap(),
        &y.as_slice::<i8>().unwrap()[5..]
    );
}

#[test]
fn prepared_without_values() {
    let mut rng = Rng::new(7);
    let symbolic = [
        (DType::F16, sym(&["n", "w"]), None),
        (DType::I64, sym(&["2"]), None),
        (DType::I64, sym(&["2"]), None),
    ];
    let (s, e) = (ints(&[1, -1]), ints(&[i64::MAX, 0]));
    for (n, w) in [(3, 4), (6, 2)] {
        let x = random(DType::F16, &[n, w], &mut rng, -1.0, 1.0);
        let out = run_prepared(Slice::default(), &symbolic, &[vec![&x, &s, &e]])
            .unwrap()
            .remove(0);
        let positions = [
            slice_positions(n, 1, i64::MAX, 1),
            slice_positions(w, -1, 0, 1),
        ];
        check(&out, &take(&nd(&x), &positions), Tol::of(DType::F16)).unwrap();
    }
}

#[test]
fn starts_given_at_run_time() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::Fixed(4), Dim::dynamic("w", 1, 4, 8)],
        )
        .unwrap();
    let starts = net
        .add_input("starts", DType::I32, &[Dim::Fixed(1)])
        .unwrap();
    let ends = net
        .add_constant("ends", Tensor::from_vec(&[1], vec![i32::MAX]).unwrap())
        .unwrap();
    let axes = net
        .add_constant("axes", Tensor::from_vec(&[1], vec![-1i32]).unwrap())
        .unwrap();
    let y = net
        .add("slice", Slice::default(), &[x, starts, ends, axes])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let mut rng = Rng::new(8);
    for (w, s) in [(5usize, 2i32), (8, -3), (2, 7)] {
        let xv = random(DType::F32, &[4, w], &mut rng, -1.0, 1.0);
        let sv = Tensor::from_vec(&[1], vec![s]).unwrap();
        let out = execute(&engine, &[&xv, &sv]).unwrap().remove(0);
        let positions = [(0..4).collect(), slice_positions(w, s as i64, i64::MAX, 1)];
        check(&out, &take(&nd(&xv), &positions), Tol::of(DType::F32)).unwrap();
    }
}
