//! Concat of several inputs along any (possibly negative) axis, every dtype.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Concat;
use torchtrt_core::plugin_api::DType;

use crate::reference::movement::concat;
use crate::support::{Rng, Tol, check, nd, pooled, random, run, run_on};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn matches_reference(
        base in prop::collection::vec(1usize..=4, 1..=4),
        count in 1usize..=4,
        axis_pick: u64,
        negative: bool,
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = base.len();
        let axis = (axis_pick % rank as u64) as usize;
        let xs: Vec<_> = (0..count)
            .map(|_| {
                let mut s = base.clone();
                s[axis] = rng.int(0, 4) as usize;
                random(dtype, &s, &mut rng, -100.0, 100.0)
            })
            .collect();
        let refs: Vec<_> = xs.iter().collect();
        let layer = Concat { axis: if negative { axis as i64 - rank as i64 } else { axis as i64 } };
        let got = run(layer, &refs)?;
        let want = concat(&xs.iter().map(nd).collect::<Vec<_>>(), axis);
        check(&got, &want, Tol::of(DType::I64))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Channel concats of one to three images, large enough to be split over the threads of
    /// a 3-thread pool.
    #[test]
    fn large_on_threads(
        batch in 1usize..=3,
        channels in prop::collection::vec(0usize..=24, 1..=4),
        h in 20usize..40,
        w in 20usize..40,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let xs: Vec<_> = channels
            .iter()
            .map(|&c| random(DType::F32, &[batch, c, h, w], &mut rng, -100.0, 100.0))
            .collect();
        let refs: Vec<_> = xs.iter().collect();
        let got = run_on(pooled(), Concat { axis: 1 }, &refs).map_err(TestCaseError::fail)?;
        let want = concat(&xs.iter().map(nd).collect::<Vec<_>>(), 1);
        check(&got[0], &want, Tol::of(DType::I64))?;
    }
}
