//! Reshape by dims and by a shape tensor, every dtype.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Reshape;
use torchtrt_core::plugin_api::DType;

use crate::support::{Rng, from_f64, random, run, shape};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn keeps_elements_in_order(shape in shape(4, 5), dtype in select(DType::ALL.to_vec()), by_tensor: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -100.0, 100.0);
        let copy_first = !shape.is_empty() && rng.coin();
        let dims = if copy_first { vec![0, -1] } else { vec![-1, 1, 1] };
        let want: Vec<usize> = if copy_first { vec![shape[0], x.numel() / shape[0]] } else { vec![x.numel(), 1, 1] };
        let got = if by_tensor {
            let s = from_f64(DType::I64, &[dims.len()], &dims.iter().map(|&d| d as f64).collect::<Vec<_>>());
            run(Reshape::default(), &[&x, &s])?
        } else {
            run(Reshape::new(dims), &[&x])?
        };
        prop_assert_eq!(got.shape(), &want[..]);
        prop_assert_eq!(got.bytes(), x.bytes());
    }
}
