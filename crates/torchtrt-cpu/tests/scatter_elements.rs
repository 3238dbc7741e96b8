//! ScatterElements: every reduction on random data, indices (duplicates, negatives) and
//! updates against a sequential reference; errors naming bad indices; shape rules.

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
use torchtrt_core::layers::{ScatterElements, ScatterReduction};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Dim, NetworkDefinition};

use harness::{compile, execute, infer_one, sym};
use reference::{Nd, indices, ravel};
use support::{Rng, Tol, check, from_f64, global, nd, random, run, run_on};

const REDUCTIONS: [ScatterReduction; 5] = [
    ScatterReduction::None,
    ScatterReduction::Add,
    ScatterReduction::Mul,
    ScatterReduction::Max,
    ScatterReduction::Min,
];

/// The data with each update applied in row-major order of the updates; integer results
/// wrap to `dtype`.
fn scatter(data: &Nd, axis: usize, idx: &Nd, upd: &Nd, op: ScatterReduction, dtype: DType) -> Nd {
    let mut out = data.clone();
    for i in indices(&idx.shape) {
        let mut dst = i.clone();
        dst[axis] = idx.at(&i) as usize;
        let at = ravel(&dst, &out.shape);
        let (a, b) = (out.data[at], upd.at(&i));
        out.data[at] = match op {
            ScatterReduction::None => b,
            ScatterReduction::Add => a + b,
            ScatterReduction::Mul => a * b,
            ScatterReduction::Max => a.max(b),
            ScatterReduction::Min => a.min(b),
        };
    }
    if dtype.is_integer() {
        out = out.map(|v| wrap(dtype, v as i64));
    }
    out
}

/// `v` wrapped into the range of the integer `dtype`.
fn wrap(dtype: DType, v: i64) -> f64 {
    match dtype {
        DType::I32 => v as i32 as f64,
        DType::I16 => v as i16 as f64,
        DType::I8 => v as i8 as f64,
        DType::U8 => v as u8 as f64,
        _ => v as f64,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn matches_reference(
        data_shape in prop::collection::vec(1usize..=4, 1..=3),
        pick: u64,
        op in select(REDUCTIONS.to_vec()),
        dtype in select(vec![DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8, DType::U8]),
        wide: bool,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = data_shape.len();
        let axis = (pick % rank as u64) as usize;
        let idx_shape: Vec<usize> = data_shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if d == axis { rng.int(0, 5) as usize } else { rng.int(1, n as i64) as usize })
            .collect();
        let n = data_shape[axis] as i64;
        let count: usize = idx_shape.iter().product();
        let raw: Vec<f64> = (0..count).map(|_| rng.int(-n, n - 1) as f64).collect();
        let idx = from_f64(if wide { DType::I64 } else { DType::I32 }, &idx_shape, &raw);
        let (lo, hi) = if dtype.is_float() { (0.5, 2.0) } else { (1.0, 9.0) };
        let data = random(dtype, &data_shape, &mut rng, lo, hi);
        let upd = random(dtype, &idx_shape, &mut rng, lo, hi);
        let layer = ScatterElements { axis: axis as i64 - if rng.coin() { rank as i64 } else { 0 }, reduction: op };
        let got = run(layer, &[&data, &idx, &upd])?;
        let positions = Nd::new(idx_shape, raw.iter().map(|&v| if v < 0.0 { v + n as f64 } else { v }).collect());
        let want = scatter(&nd(&data), axis, &positions, &nd(&upd), op, dtype);
        check(&got, &want, Tol::of(dtype).scaled(8.0))?;
    }

    #[test]
    fn bool_data_is_overwritten(shape in prop::collection::vec(1usize..=4, 1..=3), seed: u64) {
        let mut rng = Rng::new(seed);
        let data = random(DType::Bool, &shape, &mut rng, 0.0, 1.0);
        let upd = random(DType::Bool, &shape, &mut rng, 0.0, 1.0);
        let n = shape[0] as i64;
        let raw: Vec<f64> = (0..data.numel()).map(|_| rng.int(0, n - 1) as f64).collect();
        let idx = from_f64(DType::I64, &shape, &raw);
        let got = run(ScatterElements::default(), &[&data, &idx, &upd])?;
        let want = scatter(&nd(&data), 0, &nd(&idx), &nd(&upd), ScatterReduction::None, DType::Bool);
        check(&got, &want, Tol::of(DType::Bool))?;
    }
}

#[test]
fn bad_inputs_are_errors() {
    let data = from_f64(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let upd = from_f64(DType::F32, &[1, 2], &[9.0, 8.0]);
    let idx = from_f64(DType::I64, &[1, 2], &[1.0, -4.0]);
    let layer = ScatterElements {
        axis: 1,
        reduction: ScatterReduction::Add,
    };
    let err = run_on(global(), layer.clone(), &[&data, &idx, &upd]).unwrap_err();
    assert!(
        err.contains("index -4") && err.contains("element 1"),
        "{err}"
    );
    let idx3 = from_f64(DType::I64, &[1, 3], &[0.0, 0.0, 0.0]);
    let err = run_on(global(), layer.clone(), &[&data, &idx3, &upd]).unwrap_err();
    assert!(err.contains("one shape"), "{err}");
    let b = random(DType::Bool, &[2, 3], &mut Rng::new(1), 0.0, 1.0);
    let bu = random(DType::Bool, &[1, 2], &mut Rng::new(2), 0.0, 1.0);
    let ok = from_f64(DType::I64, &[1, 2], &[0.0, 1.0]);
    let err = run_on(global(), layer, &[&b, &ok, &bu]).unwrap_err();
    assert!(err.contains("bool"), "{err}");
}

#[test]
fn shape_rules() {
    let data = || (DType::F16, sym(&["n", "4"]), None);
    let layer = ScatterElements::default();
    let ts = infer_one(
        layer.clone(),
        &[
            data(),
            (DType::I32, sym(&["k", "2"]), None),
            (DType::F16, sym(&["k", "2"]), None),
        ],
    )
    .unwrap();
    assert_eq!((ts.dtype, ts.shape), (DType::F16, sym(&["n", "4"])));
    let err = infer_one(
        layer.clone(),
        &[
            data(),
            (DType::I32, sym(&["k", "2"]), None),
            (DType::F32, sym(&["k", "2"]), None),
        ],
    )
    .unwrap_err();
    assert!(err.contains("dtype"), "{err}");
    let err = infer_one(
        layer.clone(),
        &[
            data(),
            (DType::I32, sym(&["k", "2"]), None),
            (DType::F16, sym(&["k", "3"]), None),
        ],
    )
    .unwrap_err();
    assert!(err.contains("one shape"), "{err}");
    let err = infer_one(
        layer,
        &[
            data(),
            (DType::I32, sym(&["k", "5"]), None),
            (DType::F16, sym(&["k", "5"]), None),
        ],
    )
    .unwrap_err();
    assert!(err.contains("exceed"), "{err}");
}

#[test]
fn dynamic_shapes_in_an_engine() {
    let mut net = NetworkDefinition::new();
    let n = Dim::dynamic("n", 1, 4, 8);
    let data = net
        .add_input("data", DType::F32, &[n.clone(), Dim::Fixed(3)])
        .unwrap();
    let idx = net
        .add_input(
            "idx",
            DType::I64,
            &[Dim::dynamic("k", 1, 2, 8), Dim::Fixed(3)],
        )
        .unwrap();
    let upd = net
        .add_input(
            "upd",
            DType::F32,
            &[Dim::dynamic("k", 1, 2, 8), Dim::Fixed(3)],
        )
        .unwrap();
    let layer = ScatterElements {
        axis: 0,
        reduction: ScatterReduction::Max,
    };
    let y = net.add("scatter", layer, &[data, idx, upd]).unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = compile(&net).unwrap();
    let mut rng = Rng::new(5);
    for (n, k) in [(2, 4), (7, 3)] {
        let d = random(DType::F32, &[n, 3], &mut rng, -5.0, 5.0);
        let u = random(DType::F32, &[k, 3], &mut rng, -5.0, 5.0);
        let raw: Vec<f64> = (0..k * 3)
            .map(|_| rng.int(0, n as i64 - 1) as f64)
            .collect();
        let i = from_f64(DType::I64, &[k, 3], &raw);
        let out = execute(&engine, &[&d, &i, &u]).unwrap().remove(0);
        let want = scatter(
            &nd(&d),
            0,
            &nd(&i),
            &nd(&u),
            ScatterReduction::Max,
            DType::F32,
        );
        check(&out, &want, Tol::of(DType::F32)).unwrap();
    }
}
