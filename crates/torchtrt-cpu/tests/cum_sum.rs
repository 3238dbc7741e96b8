//! CumSum against running sums in f64 (integers exact): every numeric dtype, exclusive and
//! reverse, the axis as an i32/i64 scalar or one-element tensor known only at run time.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::layers::CumSum;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{LayerKind, Tensor};

use reference::Nd;
use support::{Rng, Tol, check, global, nd, numeric_dtype, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// `y[…, i, …] = Σ x[…, j, …]` over `j ≤ i` (or `<`, `≥`, `>`).
fn cum_sum(x: &Nd, axis: usize, l: &CumSum) -> Nd {
    Nd::from_fn(x.shape.clone(), |idx| {
        let i = idx[axis];
        (0..x.shape[axis])
            .filter(|&j| match (l.reverse, l.exclusive) {
                (false, false) => j <= i,
                (false, true) => j < i,
                (true, false) => j >= i,
                (true, true) => j > i,
            })
            .map(|j| {
                let mut at = idx.to_vec();
                at[axis] = j;
                x.at(&at)
            })
            .sum()
    })
}

fn axis_tensor(axis: i64, wide: bool, scalar: bool) -> Tensor {
    let shape: &[usize] = if scalar { &[] } else { &[1] };
    let t = if wide {
        Tensor::from_vec(shape, vec![axis])
    } else {
        Tensor::from_vec(shape, vec![axis as i32])
    };
    t.expect("one value")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn matches_reference(
        shape in proptest::collection::vec(1usize..=6, 1..=4),
        dtype in numeric_dtype(),
        flags in any::<[bool; 4]>(),
        axis_pick: u8,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = shape.len() as i64;
        let axis = i64::from(axis_pick) % (2 * rank) - rank;
        let layer = CumSum { exclusive: flags[0], reverse: flags[1] };
        let lo = if dtype.is_unsigned() { 0.0 } else { -5.0 };
        let x = random(dtype, &shape, &mut rng, lo, 5.0);
        let a = axis_tensor(axis, flags[2], flags[3]);
        let got = run(layer.clone(), &[&x, &a])?;
        let want = cum_sum(&nd(&x), axis.rem_euclid(rank) as usize, &layer);
        check(&got, &want, Tol::of(dtype).scaled(6.0))?;
    }
}

#[test]
fn axis_known_only_at_run_time() {
    let kind = LayerKind::from(CumSum {
        exclusive: true,
        reverse: false,
    });
    let symbolic = [
        BuildInput::new(DType::F32, &["n", "m"]),
        BuildInput::new(DType::I64, &[]),
    ];
    assert_eq!(
        infer(&kind, &symbolic).expect("infer"),
        [(DType::F32, sym(&["n", "m"]))]
    );
    let mut rng = Rng::new(6);
    let xs = [
        random(DType::F32, &[3, 4], &mut rng, -1.0, 1.0),
        random(DType::F32, &[5, 2], &mut rng, -1.0, 1.0),
    ];
    let axes = [axis_tensor(0, true, true), axis_tensor(-1, true, true)];
    let runs = vec![vec![&xs[0], &axes[0]], vec![&xs[1], &axes[1]]];
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    let LayerKind::CumSum(l) = &kind else {
        unreachable!()
    };
    check(&got[0][0], &cum_sum(&nd(&xs[0]), 0, l), Tol::of(DType::F32)).expect("axis 0");
    check(&got[1][0], &cum_sum(&nd(&xs[1]), 1, l), Tol::of(DType::F32)).expect("axis 1");
}

#[test]
fn long_axes_on_both_backends() {
    let mut rng = Rng::new(7);
    let x = random(DType::F32, &[40, 500, 3], &mut rng, -1.0, 1.0);
    let layer = CumSum {
        exclusive: false,
        reverse: true,
    };
    for axis in [0i64, 1, 2] {
        let a = axis_tensor(axis, true, false);
        let want = cum_sum(&nd(&x), axis as usize, &layer);
        let tol = Tol::of(DType::F32).scaled(50.0);
        check(&run(layer.clone(), &[&x, &a]).expect("global"), &want, tol).expect("global");
        let got = run_on(support::pooled(), layer.clone(), &[&x, &a]).expect("pooled");
        check(&got[0], &want, tol).expect("pooled");
    }
}

#[test]
fn bad_axes_are_errors() {
    let kind = LayerKind::from(CumSum::default());
    let x = BuildInput::new(DType::F32, &["n", "3"]);
    let float_axis = BuildInput::new(DType::F32, &[]);
    assert!(infer(&kind, &[x, float_axis]).is_err());
    let two = BuildInput::new(DType::I64, &["2"]);
    assert!(infer(&kind, &[BuildInput::new(DType::F32, &["n", "3"]), two]).is_err());
    let out_of_range = BuildInput::constant(axis_tensor(2, true, true));
    assert!(
        infer(
            &kind,
            &[BuildInput::new(DType::F32, &["n", "3"]), out_of_range]
        )
        .is_err()
    );
    let mut rng = Rng::new(1);
    let xt = random(DType::F32, &[2, 3], &mut rng, -1.0, 1.0);
    let err = run_on(
        global(),
        CumSum::default(),
        &[&xt, &axis_tensor(-3, false, false)],
    )
    .expect_err("axis -3 of a rank-2 input");
    assert!(err.contains("axis"), "{err}");
}

#[test]
fn engine_round_trip_with_the_axis_as_an_input() {
    let layer = CumSum {
        exclusive: false,
        reverse: true,
    };
    let inputs = [
        (
            "x",
            DType::F64,
            vec![Dim::dynamic("n", 1, 3, 6), Dim::Fixed(4)],
        ),
        ("axis", DType::I32, vec![]),
    ];
    let mut rng = Rng::new(12);
    let x = random(DType::F64, &[5, 4], &mut rng, -1.0, 1.0);
    let axes = [axis_tensor(0, false, true), axis_tensor(-1, false, true)];
    let runs = vec![vec![&x, &axes[0]], vec![&x, &axes[1]]];
    let got = run_engine(layer.clone().into(), &inputs, &runs).expect("engine");
    for (axis, out) in [0, 1].iter().zip(&got) {
        check(
            &out[0],
            &cum_sum(&nd(&x), *axis, &layer),
            Tol::of(DType::F64),
        )
        .expect("matches");
    }
}
