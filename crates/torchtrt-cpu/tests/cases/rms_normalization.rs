//! RmsNormalization against its definition, over trailing and inner axes, with scales
//! per element or broadcast, rows long enough to split.

use proptest::prelude::*;
use torchtrt_core::layers::RmsNormalization;

use crate::reference::normalization::rms_normalize;
use crate::support::{Rng, Tol, check, float_dtype, nd, random, random_signed, run};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn rms_matches_definition(dtype in float_dtype(), kind in 0u8..3, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut n = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
        let (shape, axes, sshape) = match kind {
            0 => { let c = n(1, 300); (vec![n(1, 30), c], vec![1], vec![c]) }
            1 => { let c = n(33000, 50000); (vec![n(1, 2), c], vec![1], vec![1]) }
            _ => { let (a, b, c) = (n(1, 4), n(2, 9), n(2, 30)); (vec![a, b, c], vec![1], vec![b, 1]) }
        };
        let x = random_signed(dtype, &shape, &mut rng, 0.1, 3.0);
        let s = random(dtype, &sshape, &mut rng, 0.5, 1.5);
        let layer = RmsNormalization { axes: axes.iter().map(|&a| a as i64).collect(), epsilon: 1e-5 };
        let got = run(layer, &[&x, &s])?;
        check(&got, &rms_normalize(&nd(&x), &axes, f64::from(1e-5f32), &nd(&s)), Tol::of(dtype).scaled(4.0))?;
    }
}
