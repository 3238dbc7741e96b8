//! Gather with i32/i64 indices (negative ones too) of any rank, every dtype; out-of-range
//! indices are errors naming the index.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Gather;
use torchtrt_core::plugin_api::DType;

use crate::reference::movement::gather;
use crate::support::{Rng, Tol, check, from_f64, global, nd, random, run, run_on, shape};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        data_shape in prop::collection::vec(1usize..=5, 1..=3),
        idx_shape in shape(2, 4),
        axis_pick: u64,
        negative: bool,
        wide: bool,
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &data_shape, &mut rng, -100.0, 100.0);
        let rank = data_shape.len();
        let axis = (axis_pick % rank as u64) as usize;
        let n = data_shape[axis] as i64;
        let raw: Vec<i64> = (0..idx_shape.iter().product::<usize>()).map(|_| rng.int(-n, n - 1)).collect();
        let idx_type = if wide { DType::I64 } else { DType::I32 };
        let idx = from_f64(idx_type, &idx_shape, &raw.iter().map(|&v| v as f64).collect::<Vec<_>>());
        let layer = Gather { axis: if negative { axis as i64 - rank as i64 } else { axis as i64 } };
        let got = run(layer, &[&x, &idx])?;
        let positions: Vec<usize> = raw.iter().map(|&v| if v < 0 { (v + n) as usize } else { v as usize }).collect();
        check(&got, &gather(&nd(&x), axis, &positions, &idx_shape), Tol::of(DType::I64))?;
    }
}

#[test]
fn out_of_range_index_is_an_error() {
    let x = from_f64(DType::F32, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let idx = from_f64(DType::I64, &[3], &[0.0, -3.0, 3.0]);
    let err = run_on(global(), Gather { axis: 0 }, &[&x, &idx]).unwrap_err();
    assert!(
        err.contains("index 3") && err.contains("element 2"),
        "{err}"
    );
}
