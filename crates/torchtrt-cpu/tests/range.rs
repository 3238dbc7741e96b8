//! Range: integer and float progressions (rising, falling, empty) against a plain loop,
//! shape rules with known and unknown values, folding, and a limit given at run time.

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
use torchtrt_core::layers::{Range, unknown_dim};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{NetworkDefinition, Tensor};

use harness::{compile, execute, infer_one, kinds, sym};
use reference::Nd;
use support::{Tol, check, from_f64, global, run, run_on};

/// `start, start + delta, …` while short of `limit`, by repeated comparison.
fn progression(start: f64, limit: f64, delta: f64) -> Nd {
    let mut values = Vec::new();
    let mut i = 0.0;
    loop {
        let v = start + i * delta;
        let before = if delta > 0.0 { v < limit } else { v > limit };
        if !before {
            break;
        }
        values.push(v);
        i += 1.0;
    }
    Nd::new(vec![values.len()], values)
}

fn scalar(dtype: DType, v: f64) -> Tensor {
    from_f64(dtype, &[], &[v])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn integers_match_reference(
        dtype in select(vec![DType::I64, DType::I32, DType::I16]),
        start in -60i64..=60,
        limit in -60i64..=60,
        delta in prop_oneof![-9i64..=-1, 1i64..=9],
    ) {
        let (s, l, d) = (scalar(dtype, start as f64), scalar(dtype, limit as f64), scalar(dtype, delta as f64));
        let got = run(Range, &[&s, &l, &d])?;
        check(&got, &progression(start as f64, limit as f64, delta as f64), Tol::of(dtype))?;
    }

    #[test]
    fn floats_match_reference(
        dtype in select(vec![DType::F32, DType::F64, DType::F16, DType::BF16]),
        start in -10.0f64..10.0,
        limit in -10.0f64..10.0,
        delta in prop_oneof![-3.0f64..-0.1, 0.1f64..3.0],
    ) {
        let (s, l, d) = (scalar(dtype, start), scalar(dtype, limit), scalar(dtype, delta));
        let (sv, lv, dv) = (s.to_f64_vec()[0], l.to_f64_vec()[0], d.to_f64_vec()[0]);
        let got = run(Range, &[&s, &l, &d])?;
        let want = progression(sv, lv, dv);
        let rounded = nd_round(dtype, &want);
        check(&got, &rounded, Tol::of(dtype))?;
    }
}

/// `x` rounded to `dtype`, element by element.
fn nd_round(dtype: DType, x: &Nd) -> Nd {
    let t = from_f64(dtype, &x.shape, &x.data);
    Nd::new(x.shape.clone(), t.to_f64_vec())
}

#[test]
fn bad_inputs_are_errors() {
    let f = |v| scalar(DType::F32, v);
    let err = run_on(global(), Range, &[&f(0.0), &f(1.0), &f(0.0)]).unwrap_err();
    assert!(err.contains("delta is 0"), "{err}");
    let i = |v| scalar(DType::I32, v);
    let err = run_on(global(), Range, &[&i(0.0), &i(1.0), &i(0.0)]).unwrap_err();
    assert!(err.contains("delta is 0"), "{err}");
    let err = run_on(global(), Range, &[&f(0.0), &f(f64::INFINITY), &f(1.0)]).unwrap_err();
    assert!(err.contains("finite"), "{err}");
    let err = run_on(global(), Range, &[&f(0.0), &i(3.0), &f(1.0)]).unwrap_err();
    assert!(err.contains("limit must be a f32 scalar"), "{err}");
    let pair = from_f64(DType::F32, &[2], &[1.0, 2.0]);
    let err = run_on(global(), Range, &[&f(0.0), &pair, &f(1.0)]).unwrap_err();
    assert!(err.contains("scalar"), "{err}");
    let b = Tensor::from_bytes(DType::Bool, &[], &[1]).unwrap();
    let err = run_on(global(), Range, &[&b, &b, &b]).unwrap_err();
    assert!(err.contains("bool"), "{err}");
    let u = Tensor::scalar(1u8);
    let err = run_on(global(), Range, &[&u, &u, &u]).unwrap_err();
    assert!(err.contains("not defined for u8"), "{err}");
}

#[test]
fn shape_rules() {
    let (s, l, d) = (
        Tensor::scalar(2i64),
        Tensor::scalar(11i64),
        Tensor::scalar(3i64),
    );
    let known = |t| (DType::I64, vec![], Some(t));
    let ts = infer_one(Range, &[known(&s), known(&l), known(&d)]).unwrap();
    assert_eq!((ts.dtype, ts.shape), (DType::I64, sym(&["3"])));
    let ts = infer_one(Range, &[known(&s), (DType::I64, vec![], None), known(&d)]).unwrap();
    assert_eq!(ts.shape, vec![unknown_dim()]);
    let one = (DType::I64, sym(&["1"]), None);
    assert!(infer_one(Range, &[known(&s), one.clone(), known(&d)]).is_ok());
    let err = infer_one(
        Range,
        &[known(&s), (DType::I64, sym(&["n"]), None), known(&d)],
    )
    .unwrap_err();
    assert!(err.contains("scalar"), "{err}");
}

#[test]
fn constant_inputs_fold() {
    let mut net = NetworkDefinition::new();
    let s = net.add_constant("s", Tensor::scalar(1.0f32)).unwrap();
    let l = net.add_constant("l", Tensor::scalar(2.0f32)).unwrap();
    let d = net.add_constant("d", Tensor::scalar(0.25f32)).unwrap();
    let y = net.add("range", Range, &[s, l, d]).unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    assert_eq!(kinds(&engine), ["Constant"]);
    let out = execute(&engine, &[]).unwrap().remove(0);
    assert_eq!(out.as_slice::<f32>().unwrap(), &[1.0, 1.25, 1.5, 1.75]);
}

#[test]
fn limit_given_at_run_time() {
    let mut net = NetworkDefinition::new();
    let s = net.add_constant("s", Tensor::scalar(10i32)).unwrap();
    let l = net.add_input("limit", DType::I32, &[]).unwrap();
    let d = net.add_constant("d", Tensor::scalar(-3i32)).unwrap();
    let y = net.add("range", Range, &[s, l, d]).unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let out = execute(&engine, &[&Tensor::scalar(0i32)])
        .unwrap()
        .remove(0);
    assert_eq!(out.as_slice::<i32>().unwrap(), &[10, 7, 4, 1]);
    let out = execute(&engine, &[&Tensor::scalar(20i32)])
        .unwrap()
        .remove(0);
    assert_eq!(out.shape(), [0]);
}
