//! Cast between every pair of dtypes: rounding, truncation, saturation, wrapping, NaN, bool.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Cast;
use torchtrt_core::plugin_api::DType;

use crate::reference::cast::cast;
use crate::support::{Rng, Tol, check, from_f64, nd, random, run, shape};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_reference(shape in shape(3, 6), from in select(DType::ALL.to_vec()), to in select(DType::ALL.to_vec()), seed: u64) {
        let mut rng = Rng::new(seed);
        let x = match from {
            DType::U8 => random(from, &shape, &mut rng, 0.0, 255.0),
            DType::I8 => random(from, &shape, &mut rng, -128.0, 127.0),
            d if d.is_integer() => random(from, &shape, &mut rng, -40000.0, 40000.0),
            _ => random(from, &shape, &mut rng, -400.0, 400.0),
        };
        let got = run(Cast { to }, &[&x])?;
        check(&got, &nd(&x).map(|v| cast(v, from, to)), Tol::of(DType::I64))?;
    }
}

#[test]
fn special_float_values() {
    let values = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        1e10,
        -1e10,
        2.9,
        -2.9,
        0.5,
    ];
    for from in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = from_f64(from, &[values.len()], &values);
        for to in DType::ALL {
            let got = run(Cast { to }, &[&x]).unwrap();
            check(
                &got,
                &nd(&x).map(|v| cast(v, from, to)),
                Tol::of(DType::I64),
            )
            .unwrap();
        }
    }
}
