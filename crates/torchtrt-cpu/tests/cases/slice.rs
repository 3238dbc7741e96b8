//! Slice with random starts, ends (incl. out of range), negative axes and steps, every dtype.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Slice;
use torchtrt_core::plugin_api::DType;

use crate::reference::movement::{select as take, slice_positions};
use crate::support::{Rng, Tol, check, nd, random, run, shape};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn matches_reference(shape in shape(4, 6), dtype in select(DType::ALL.to_vec()), seed: u64) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -100.0, 100.0);
        let rank = shape.len() as i64;
        let mut layer = Slice { starts: vec![], ends: vec![], axes: vec![], steps: vec![] };
        let mut positions: Vec<Vec<usize>> = shape.iter().map(|&n| (0..n).collect()).collect();
        for axis in 0..rank {
            if rng.coin() {
                continue;
            }
            let n = shape[axis as usize] as i64;
            let step = if rng.coin() { rng.int(1, 3) } else { -rng.int(1, 3) };
            let start = if rng.int(0, 5) == 0 { i64::MIN / 2 } else { rng.int(-n - 2, n + 2) };
            let end = if rng.int(0, 5) == 0 { i64::MAX } else { rng.int(-n - 2, n + 2) };
            layer.axes.push(if rng.coin() { axis - rank } else { axis });
            layer.starts.push(start);
            layer.ends.push(end);
            layer.steps.push(step);
            positions[axis as usize] = slice_positions(n as usize, start, end, step);
        }
        let got = run(layer, &[&x])?;
        check(&got, &take(&nd(&x), &positions), Tol::of(DType::I64))?;
    }
}
