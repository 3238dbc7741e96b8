//! ArgMax / ArgMin against a first-or-last-best scan: float and integer dtypes, ties,
//! NaNs, keep_dims, symbolic shapes.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::LayerKind;
use torchtrt_core::Tensor;
use torchtrt_core::layers::ArgReduce;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;

use reference::Nd;
use support::{Rng, Tol, check, from_f64, global, nd, numeric_dtype, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// The position of the best element of each line along `axis` (NaN best, ties first or
/// last).
fn arg_reduce(x: &Nd, l: &ArgReduce) -> Nd {
    let rank = x.shape.len();
    let axis = if l.axis < 0 {
        l.axis + rank as i64
    } else {
        l.axis
    } as usize;
    let mut shape = x.shape.clone();
    shape[axis] = 1;
    let mut out = Nd::from_fn(shape.clone(), |idx| {
        let mut best: Option<(f64, usize)> = None;
        for i in 0..x.shape[axis] {
            let mut at = idx.to_vec();
            at[axis] = i;
            let v = x.at(&at);
            let better = match best {
                None => true,
                Some((b, _)) if b.is_nan() => v.is_nan() && l.select_last_index,
                Some(_) if v.is_nan() => true,
                Some((b, _)) if v == b => l.select_last_index,
                Some((b, _)) => (v > b) == l.max,
            };
            if better {
                best = Some((v, i));
            }
        }
        best.map_or(-1.0, |(_, i)| i as f64)
    });
    if !l.keep_dims {
        out.shape.remove(axis);
    }
    out
}

/// Values from a small set, so ties are common.
fn tied(dtype: DType, shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.int(0, 6) as f64 * 0.5).collect();
    from_f64(dtype, shape, &v)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn matches_reference(
        shape in proptest::collection::vec(1usize..=5, 1..=4),
        dtype in numeric_dtype(),
        flags in any::<[bool; 4]>(),
        axis_pick: u8,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let rank = shape.len() as i64;
        let axis = i64::from(axis_pick) % (2 * rank) - rank;
        let layer = ArgReduce { max: flags[0], axis, keep_dims: flags[1], select_last_index: flags[2] };
        let x = if flags[3] {
            tied(dtype, &shape, &mut rng)
        } else {
            support::random(dtype, &shape, &mut rng, -100.0, 100.0)
        };
        let got = run(layer.clone(), &[&x])?;
        prop_assert_eq!(got.dtype(), DType::I64);
        check(&got, &arg_reduce(&nd(&x), &layer), Tol::of(DType::I64))?;
    }
}

#[test]
fn nan_wins_both_ways() {
    let x = from_f64(DType::F32, &[6], &[1.0, f64::NAN, 3.0, f64::NAN, -1.0, 2.0]);
    for max in [true, false] {
        for (last, want) in [(false, 1), (true, 3)] {
            let layer = ArgReduce {
                max,
                axis: 0,
                keep_dims: false,
                select_last_index: last,
            };
            let got = run(layer, &[&x]).expect("run");
            assert_eq!(got.to_i64_vec(), Some(vec![want]), "max {max} last {last}");
        }
    }
}

#[test]
fn shape_rule_and_symbolic_runs() {
    let keep = LayerKind::from(ArgReduce {
        max: true,
        axis: 1,
        keep_dims: true,
        select_last_index: false,
    });
    let drop = LayerKind::from(ArgReduce {
        max: false,
        axis: -1,
        keep_dims: false,
        select_last_index: true,
    });
    let x = [BuildInput::new(DType::F16, &["n", "s", "4"])];
    assert_eq!(
        infer(&keep, &x).expect("keep"),
        [(DType::I64, sym(&["n", "1", "4"]))]
    );
    assert_eq!(
        infer(&drop, &x).expect("drop"),
        [(DType::I64, sym(&["n", "s"]))]
    );
    let empty = [BuildInput::new(DType::F32, &["n", "0", "4"])];
    assert!(infer(&keep, &empty).is_err());
    assert!(infer(&keep, &[BuildInput::new(DType::Bool, &["2", "2"])]).is_err());
    let mut rng = Rng::new(2);
    let xs: Vec<_> = [[1, 3, 4], [5, 1, 4], [2, 9, 4]]
        .iter()
        .map(|s| support::random(DType::F16, s, &mut rng, -3.0, 3.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x]).collect();
    for layer in [keep, drop] {
        let got = run_prepared(global(), &layer, &x, &runs).expect("run");
        let LayerKind::ArgReduce(l) = &layer else {
            unreachable!()
        };
        for (x, out) in xs.iter().zip(&got) {
            check(&out[0], &arg_reduce(&nd(x), l), Tol::of(DType::I64)).expect("matches");
        }
    }
}

#[test]
fn large_input_on_both_backends() {
    let mut rng = Rng::new(8);
    let x = support::random(DType::F32, &[7, 300, 40], &mut rng, -5.0, 5.0);
    for axis in [0, 1, 2] {
        let layer = ArgReduce {
            max: true,
            axis,
            keep_dims: false,
            select_last_index: false,
        };
        let want = arg_reduce(&nd(&x), &layer);
        check(
            &run(layer.clone(), &[&x]).expect("global"),
            &want,
            Tol::of(DType::I64),
        )
        .expect("global");
        let got = run_on(support::pooled(), layer, &[&x]).expect("pooled");
        check(&got[0], &want, Tol::of(DType::I64)).expect("pooled");
    }
}

#[test]
fn engine_round_trip_with_dynamic_axis_length() {
    let layer = ArgReduce {
        max: false,
        axis: -1,
        keep_dims: true,
        select_last_index: true,
    };
    let inputs = [(
        "x",
        DType::I32,
        vec![Dim::Fixed(3), Dim::dynamic("n", 1, 4, 9)],
    )];
    let mut rng = Rng::new(11);
    let xs: Vec<_> = [1, 9]
        .iter()
        .map(|&n| tied(DType::I32, &[3, n], &mut rng))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x]).collect();
    let got = run_engine(layer.clone().into(), &inputs, &runs).expect("engine");
    for (x, out) in xs.iter().zip(&got) {
        check(&out[0], &arg_reduce(&nd(x), &layer), Tol::of(DType::I64)).expect("matches");
    }
}
