//! Pad: every mode on random shapes with random (also negative) pads, optional axes and
//! constant values, every dtype; shape rules on symbolic inputs; pads given at run time.

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
use torchtrt_core::layers::{Pad, PadMode, unknown_dim};
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{Dim, NetworkDefinition, Tensor};

use harness::{compile, execute, infer_one, ints, run_prepared, sym};
use reference::Nd;
use support::{Rng, Tol, check, from_f64, global, nd, random, run_on};

/// onnxruntime's Pad: crop by the negative pads, then pad the rest by walking indices back
/// into the cropped range one reflection (or period) at a time. `None` when the pads do
/// not fit.
fn pad(x: &Nd, pads: &[(i64, i64)], mode: PadMode, value: f64) -> Option<Nd> {
    let mut plans = Vec::new();
    for (&n, &(b, e)) in x.shape.iter().zip(pads) {
        let lo = (-b).max(0);
        let kept = n as i64 - lo - (-e).max(0);
        let len = kept + b.max(0) + e.max(0);
        if kept < 0 || (mode != PadMode::Constant && kept == 0 && len > 0) {
            return None;
        }
        plans.push((lo, kept, b.max(0), len as usize));
    }
    let shape = plans.iter().map(|p| p.3).collect();
    Some(Nd::from_fn(shape, |idx| {
        let mut src = Vec::new();
        for (&i, &(lo, kept, first, _)) in idx.iter().zip(&plans) {
            let mut j = i as i64 - first;
            if !(0..kept).contains(&j) {
                match mode {
                    PadMode::Constant => return value,
                    PadMode::Edge => j = j.clamp(0, kept - 1),
                    PadMode::Wrap => {
                        while j < 0 {
                            j += kept;
                        }
                        while j >= kept {
                            j -= kept;
                        }
                    }
                    PadMode::Reflect if kept == 1 => j = 0,
                    PadMode::Reflect => loop {
                        if j < 0 {
                            j = -j;
                        } else if j >= kept {
                            j = 2 * (kept - 1) - j;
                        } else {
                            break;
                        }
                    },
                }
            }
            src.push((lo + j) as usize);
        }
        x.at(&src)
    }))
}

const MODES: [PadMode; 4] = [
    PadMode::Constant,
    PadMode::Reflect,
    PadMode::Edge,
    PadMode::Wrap,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_reference(
        shape in prop::collection::vec(0usize..=4, 0..=3),
        mode in select(MODES.to_vec()),
        dtype in select(DType::ALL.to_vec()),
        constant in 0u8..3,
        with_axes: bool,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -100.0, 100.0);
        let rank = shape.len();
        let mut axes: Vec<usize> = (0..rank).filter(|_| !with_axes || rng.coin()).collect();
        if with_axes && axes.len() > 1 && rng.coin() {
            axes.reverse();
        }
        let begin: Vec<i64> = axes.iter().map(|_| rng.int(-3, 4)).collect();
        let end: Vec<i64> = axes.iter().map(|_| rng.int(-3, 4)).collect();
        let mut per_dim = vec![(0, 0); rank];
        for (k, &a) in axes.iter().enumerate() {
            per_dim[a] = (begin[k], end[k]);
        }
        let fill = random(dtype, &[], &mut rng, -100.0, 100.0);
        let (value, fill) = match constant {
            0 => (0.0, None),
            1 => (0.0, Some(Tensor::zeros(dtype, &[0]))),
            _ => (fill.to_f64_vec()[0], Some(fill)),
        };
        let pads = ints(&[begin, end].concat());
        let axes_t = ints(&axes
            .iter()
            .map(|&a| if rng.coin() { a as i64 - rank as i64 } else { a as i64 })
            .collect::<Vec<_>>());
        let zero = Tensor::zeros(dtype, &[]);
        let mut inputs = vec![&x, &pads];
        if with_axes {
            inputs.push(fill.as_ref().unwrap_or(&zero));
            inputs.push(&axes_t);
        } else if let Some(f) = &fill {
            inputs.push(f);
        }
        let got = run_on(global(), Pad { mode }, &inputs);
        match pad(&nd(&x), &per_dim, mode, value) {
            Some(want) => {
                let got = got.map_err(TestCaseError::fail)?;
                check(&got[0], &want, Tol::of(DType::I64))?;
            }
            None => prop_assert!(got.is_err(), "pads {per_dim:?} on {shape:?} should fail"),
        }
    }
}

#[test]
fn shape_rules() {
    let x = || (DType::F32, sym(&["n", "3"]), None);
    let pads = ints(&[1, 0, 2, -1]);
    let ts = infer_one(
        Pad::default(),
        &[x(), (DType::I64, sym(&["4"]), Some(&pads))],
    )
    .unwrap();
    assert_eq!(ts.shape, vec![DimExpr::sym("n") + 3, DimExpr::Const(2)]);
    let axes = ints(&[-1]);
    let two = ints(&[2, 2]);
    let ts = infer_one(
        Pad::default(),
        &[
            x(),
            (DType::I64, sym(&["2"]), Some(&two)),
            (DType::F32, vec![], None),
            (DType::I64, sym(&["1"]), Some(&axes)),
        ],
    )
    .unwrap();
    assert_eq!(ts.shape, sym(&["n", "7"]));
    let ts = infer_one(Pad::default(), &[x(), (DType::I64, sym(&["4"]), None)]).unwrap();
    assert_eq!(ts.shape, vec![unknown_dim(); 2]);

    let crop = ints(&[0, -2, 0, -2]);
    let err = infer_one(
        Pad::default(),
        &[x(), (DType::I64, sym(&["4"]), Some(&crop))],
    )
    .unwrap_err();
    assert!(err.contains("crop"), "{err}");
    let err = infer_one(
        Pad::default(),
        &[x(), (DType::I64, sym(&["2"]), Some(&two))],
    )
    .unwrap_err();
    assert!(err.contains("2 entries"), "{err}");
    let err = infer_one(
        Pad::default(),
        &[
            x(),
            (DType::I64, sym(&["4"]), Some(&pads)),
            (DType::F16, vec![], None),
        ],
    )
    .unwrap_err();
    assert!(err.contains("constant value"), "{err}");
}

#[test]
fn reflect_follows_numpy_for_long_pads() {
    let x = from_f64(DType::F32, &[3], &[1.0, 2.0, 3.0]);
    let got = run_on(
        global(),
        Pad {
            mode: PadMode::Reflect,
        },
        &[&x, &ints(&[5, 7])],
    )
    .unwrap()
    .remove(0);
    let want = [
        2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0, 2.0,
    ];
    assert_eq!(got.as_slice::<f32>().unwrap(), want);
}

#[test]
fn prepared_for_symbolic_dims() {
    let mut rng = Rng::new(6);
    let a = random(DType::F16, &[2, 3], &mut rng, -1.0, 1.0);
    let b = random(DType::F16, &[4, 1], &mut rng, -1.0, 1.0);
    let pads = ints(&[1, 2, 0, 1]);
    let symbolic = [
        (DType::F16, sym(&["n", "w"]), None),
        (DType::I64, sym(&["4"]), Some(&pads)),
    ];
    let layer = Pad {
        mode: PadMode::Edge,
    };
    let outs = run_prepared(layer, &symbolic, &[vec![&a, &pads], vec![&b, &pads]]).unwrap();
    for (out, x) in outs.iter().zip([&a, &b]) {
        let want = pad(&nd(x), &[(1, 0), (2, 1)], PadMode::Edge, 0.0).unwrap();
        check(out, &want, Tol::of(DType::F16)).unwrap();
    }
}

#[test]
fn pads_given_at_run_time() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::I64,
            &[Dim::dynamic("n", 1, 2, 4), Dim::Fixed(3)],
        )
        .unwrap();
    let pads = net.add_input("pads", DType::I64, &[Dim::Fixed(4)]).unwrap();
    let value = net.add_input("value", DType::I64, &[]).unwrap();
    let y = net
        .add(
            "pad",
            Pad {
                mode: PadMode::Constant,
            },
            &[x, pads, value],
        )
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let mut rng = Rng::new(2);
    for (n, p) in [(1, [0, 1, 2, -1]), (4, [-2, 0, 1, 3])] {
        let xv = random(DType::I64, &[n, 3], &mut rng, -50.0, 50.0);
        let out = execute(&engine, &[&xv, &ints(&p), &Tensor::scalar(-7i64)])
            .unwrap()
            .remove(0);
        let want = pad(
            &nd(&xv),
            &[(p[0], p[2]), (p[1], p[3])],
            PadMode::Constant,
            -7.0,
        )
        .unwrap();
        check(&out, &want, Tol::of(DType::I64)).unwrap();
    }
}
