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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Shapes big enough for the tiled path (batched 2-D transposes), every element width.
    #[test]
    fn tiled_transposes(
        dims in prop::collection::vec(1usize..40, 3..=4),
        perm_pick: u64,
        dtype in select(vec![DType::F32, DType::F16, DType::I8, DType::I64]),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &dims, &mut rng, -100.0, 100.0);
        let perms: Vec<Vec<usize>> = match dims.len() {
            3 => vec![vec![0, 2, 1], vec![2, 1, 0], vec![1, 2, 0], vec![2, 0, 1]],
            _ => vec![vec![0, 2, 3, 1], vec![0, 3, 1, 2], vec![0, 1, 3, 2], vec![3, 2, 1, 0]],
        };
        let perm = perms[(perm_pick % perms.len() as u64) as usize].clone();
        let got = run(Transpose { perm: perm.clone() }, &[&x])?;
        check(&got, &transpose(&nd(&x), &perm), Tol::of(DType::I64))?;
    }

    /// An image's two to four planes moved channels last (the interleaving path), with
    /// runs of rows that cross images.
    #[test]
    fn few_planes_moved_channels_last(
        n in 1usize..4, c in 2usize..=4, h in 1usize..40, w in 1usize..40,
        dtype in select(vec![DType::F32, DType::F16, DType::I64]),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &[n, c, h, w], &mut rng, -100.0, 100.0);
        let perm = vec![0, 2, 3, 1];
        let got = run(Transpose { perm: perm.clone() }, &[&x])?;
        check(&got, &transpose(&nd(&x), &perm), Tol::of(DType::I64))?;
    }
}
