//! GatherElements: random data and index shapes (index dims smaller than the data's off the
//! axis), i32/i64 and negative indices, every dtype; errors naming bad indices; shape rules.

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
use torchtrt_core::layers::GatherElements;
use torchtrt_core::plugin_api::DType;

use harness::{infer_one, run_prepared, sym};
use reference::Nd;
use support::{Rng, Tol, check, from_f64, global, nd, random, run, run_on};

/// `out[i] = data[i with i[axis] replaced by indices[i]]` (indices already non-negative).
fn gather_elements(data: &Nd, axis: usize, indices: &Nd) -> Nd {
    Nd::from_fn(indices.shape.clone(), |idx| {
        let mut src = idx.to_vec();
        src[axis] = indices.at(idx) as usize;
        data.at(&src)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn matches_reference(
        data_shape in prop::collection::vec(1usize..=5, 1..=4),
        pick: u64,
        negative_axis: bool,
        wide: bool,
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = data_shape.len();
        let axis = (pick % rank as u64) as usize;
        let idx_shape: Vec<usize> = data_shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if d == axis { rng.int(0, 6) as usize } else { rng.int(1, n as i64) as usize })
            .collect();
        let n = data_shape[axis] as i64;
        let count: usize = idx_shape.iter().product();
        let raw: Vec<f64> = (0..count).map(|_| rng.int(-n, n - 1) as f64).collect();
        let idx = from_f64(if wide { DType::I64 } else { DType::I32 }, &idx_shape, &raw);
        let data = random(dtype, &data_shape, &mut rng, -100.0, 100.0);
        let layer = GatherElements { axis: if negative_axis { axis as i64 - rank as i64 } else { axis as i64 } };
        let got = run(layer, &[&data, &idx])?;
        let positions = Nd::new(idx_shape, raw.iter().map(|&v| if v < 0.0 { v + n as f64 } else { v }).collect());
        check(&got, &gather_elements(&nd(&data), axis, &positions), Tol::of(DType::I64))?;
    }
}

#[test]
fn out_of_range_index_is_an_error() {
    let data = from_f64(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let idx = from_f64(DType::I64, &[2, 2], &[0.0, -3.0, 2.0, 3.0]);
    let err = run_on(global(), GatherElements { axis: 1 }, &[&data, &idx]).unwrap_err();
    assert!(
        err.contains("index 3") && err.contains("element 3"),
        "{err}"
    );
    let idx = from_f64(DType::I32, &[1, 1], &[-3.0]);
    let err = run_on(global(), GatherElements { axis: 0 }, &[&data, &idx]).unwrap_err();
    assert!(err.contains("index -3"), "{err}");
    let idx = from_f64(DType::I64, &[3, 1], &[0.0, 1.0, 0.0]);
    let err = run_on(global(), GatherElements { axis: 1 }, &[&data, &idx]).unwrap_err();
    assert!(err.contains("exceed"), "{err}");
}

#[test]
fn shape_rules() {
    let data = || (DType::BF16, sym(&["n", "4"]), None);
    let ts = infer_one(
        GatherElements { axis: 0 },
        &[data(), (DType::I64, sym(&["k", "2"]), None)],
    )
    .unwrap();
    assert_eq!((ts.dtype, ts.shape), (DType::BF16, sym(&["k", "2"])));
    let err = infer_one(
        GatherElements { axis: 0 },
        &[data(), (DType::I64, sym(&["k"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("rank"), "{err}");
    let err = infer_one(
        GatherElements { axis: 0 },
        &[data(), (DType::F32, sym(&["k", "2"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("i32 or i64"), "{err}");
    let err = infer_one(
        GatherElements { axis: 2 },
        &[data(), (DType::I64, sym(&["k", "2"]), None)],
    )
    .unwrap_err();
    assert!(err.contains("out of range"), "{err}");
}

#[test]
fn prepared_for_symbolic_dims() {
    let mut rng = Rng::new(3);
    let symbolic = [
        (DType::F32, sym(&["n", "w"]), None),
        (DType::I64, sym(&["k", "w"]), None),
    ];
    for (n, k, w) in [(2, 5, 3), (7, 1, 64)] {
        let data = random(DType::F32, &[n, w], &mut rng, -1.0, 1.0);
        let raw: Vec<f64> = (0..k * w)
            .map(|_| rng.int(0, n as i64 - 1) as f64)
            .collect();
        let idx = from_f64(DType::I64, &[k, w], &raw);
        let out = run_prepared(GatherElements { axis: 0 }, &symbolic, &[vec![&data, &idx]])
            .unwrap()
            .remove(0);
        let want = gather_elements(&nd(&data), 0, &nd(&idx));
        check(&out, &want, Tol::of(DType::F32)).unwrap();
    }
}
