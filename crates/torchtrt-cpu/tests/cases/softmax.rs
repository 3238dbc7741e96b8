//! Softmax and log-softmax along any axis, every float dtype.

use proptest::prelude::*;
use torchtrt_core::layers::Softmax;

use crate::reference::softmax::softmax;
use crate::support::{Rng, Tol, check, float_dtype, nd, random, run};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(shape in prop::collection::vec(1usize..=6, 1..=4), axis_pick: u64, negative: bool, log: bool, dtype in float_dtype(), seed: u64) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -5.0, 5.0);
        let rank = shape.len();
        let axis = (axis_pick % rank as u64) as usize;
        let layer = Softmax { axis: if negative { axis as i64 - rank as i64 } else { axis as i64 }, log };
        let got = run(layer, &[&x])?;
        check(&got, &softmax(&nd(&x), axis, log), Tol::of(dtype).scaled(1.0))?;
    }
}

#[test]
fn large_inputs_do_not_overflow() {
    let x = crate::support::from_f64(
        torchtrt_core::plugin_api::DType::F32,
        &[2, 3],
        &[1000.0, 1001.0, 1002.0, -1000.0, -1001.0, -1002.0],
    );
    let got = run(
        Softmax {
            axis: 1,
            log: false,
        },
        &[&x],
    )
    .unwrap();
    assert!(got.to_f64_vec().iter().all(|v| v.is_finite()));
}
