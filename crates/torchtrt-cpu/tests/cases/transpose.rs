//! Transpose by random permutations, every dtype.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Transpose;
use torchtrt_core::plugin_api::DType;

use crate::reference::movement::transpose;
use crate::support::{Rng, Tol, check, nd, random, run, shape};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(shape in shape(5, 5), dtype in select(DType::ALL.to_vec()), seed: u64) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &shape, &mut rng, -100.0, 100.0);
        let mut perm: Vec<usize> = (0..shape.len()).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.int(0, i as i64) as usize);
        }
        let got = run(Transpose { perm: perm.clone() }, &[&x])?;
        check(&got, &transpose(&nd(&x), &perm), Tol::of(DType::I64))?;
    }
}

#[test]
fn large_matrix_transpose() {
    let x = random(DType::F32, &[257, 311], &mut Rng::new(7), -1.0, 1.0);
    let got = run(Transpose { perm: vec![1, 0] }, &[&x]).unwrap();
    check(&got, &transpose(&nd(&x), &[1, 0]), Tol::of(DType::I64)).unwrap();
}
