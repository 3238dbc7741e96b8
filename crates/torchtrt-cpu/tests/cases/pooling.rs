//! Pooling: max and average, 1-D to 3-D, strides, dilations, padding, ceil mode,
//! count_include_pad.

use proptest::prelude::*;
use torchtrt_core::layers::{PoolKind, Pooling};

use crate::reference::pooling::{PoolParams, pool};
use crate::support::{Rng, Tol, check, float_dtype, nd, random, run};

fn cases() -> impl Strategy<Value = (Vec<usize>, PoolParams)> {
    (1usize..=3, any::<u64>()).prop_map(|(spatial, seed)| {
        let mut rng = Rng::new(seed);
        let mut p = PoolParams {
            kernel: vec![],
            strides: vec![],
            dilations: vec![],
            pads_begin: vec![],
            pads_end: vec![],
            ceil_mode: rng.coin(),
            count_include_pad: rng.coin(),
            max: rng.coin(),
            lp: None,
        };
        if !p.max && rng.int(0, 2) == 0 {
            p.lp = Some(rng.int(1, 3));
        }
        let mut shape = vec![rng.int(1, 2) as usize, rng.int(1, 3) as usize];
        let max_in = [0, 12, 8, 6][spatial];
        for _ in 0..spatial {
            let k = rng.int(1, 3) as usize;
            let d = rng.int(1, 2) as usize;
            let pb = rng.int(0, (k as i64 - 1).min(1)) as usize;
            let pe = rng.int(0, (k as i64 - 1).min(1)) as usize;
            let span = d * (k - 1) + 1;
            let min_in = span.saturating_sub(pb + pe).max(1);
            shape.push(rng.int(min_in as i64, max_in.max(min_in) as i64) as usize);
            p.kernel.push(k);
            p.strides.push(rng.int(1, 3) as usize);
            p.dilations.push(d);
            p.pads_begin.push(pb);
            p.pads_end.push(pe);
        }
        (shape, p)
    })
}

fn layer(p: &PoolParams) -> Pooling {
    let v = |x: &[usize]| x.iter().map(|&v| v as i64).collect();
    Pooling {
        kind: match (p.max, p.lp) {
            (true, _) => PoolKind::Max,
            (false, Some(p)) => PoolKind::Lp { p },
            (false, None) => PoolKind::Average,
        },
        kernel: v(&p.kernel),
        strides: v(&p.strides),
        pads_begin: v(&p.pads_begin),
        pads_end: v(&p.pads_end),
        dilations: v(&p.dilations),
        ceil_mode: p.ceil_mode,
        count_include_pad: p.count_include_pad,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_reference((shape, p) in cases(), dtype in float_dtype(), seed: u64) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -2.0, 2.0);
        let got = run(layer(&p), &[&x])?;
        check(&got, &pool(&nd(&x), &p), Tol::of(dtype).scale(2.0))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4))]

    /// Inputs big enough to split into parallel tasks: strided max pools (squeezenet's ceil
    /// mode on odd sizes, 1-D), padded average pools on wide and on small planes (7×7, where
    /// most windows touch padding), a window spanning a whole small plane, and LRN's window
    /// over a channel axis made spatial ([N, 1, C, H, W]).
    #[test]
    fn larger_inputs(c in 8usize..24, hw in 20usize..40, dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let odd = hw | 1;
        let cases = [
            (vec![2, c, hw, hw + 1], vec![3, 3], vec![2, 2], vec![0, 0], true, false, false),
            (vec![1, c, odd, odd + 2], vec![3, 3], vec![2, 2], vec![0, 0], true, false, true),
            (vec![1, c, hw * 3], vec![3], vec![2], vec![1], true, false, false),
            (vec![1, c, hw + 2, hw], vec![3, 3], vec![1, 1], vec![1, 1], false, false, false),
            (vec![1, c * 8, 7, 7], vec![3, 3], vec![1, 1], vec![1, 1], false, true, false),
            (vec![1, c * 8, 7, 7], vec![3, 3], vec![1, 1], vec![1, 1], true, false, false),
            (vec![2, c * 8, 7, 7], vec![7, 7], vec![1, 1], vec![0, 0], false, false, false),
            (vec![1, 1, c, hw, hw], vec![5, 1, 1], vec![1, 1, 1], vec![2, 0, 0], false, true, false),
        ];
        for (shape, kernel, strides, pads, max, count_include_pad, ceil_mode) in cases {
            let p = PoolParams {
                dilations: vec![1; kernel.len()],
                kernel,
                strides,
                pads_begin: pads.clone(),
                pads_end: pads,
                ceil_mode,
                count_include_pad,
                max,
                lp: None,
            };
            let x = random(dtype, &shape, &mut rng, -2.0, 2.0);
            let got = run(layer(&p), &[&x])?;
            check(&got, &pool(&nd(&x), &p), Tol::of(dtype).scale(2.0))?;
        }
    }
}
