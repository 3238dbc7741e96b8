//! DepthToSpace (DCR and CRD) against its index formula, every dtype, symbolic shapes, and
//! as the inverse of SpaceToDepth.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::LayerKind;
use torchtrt_core::layers::{DepthToSpace, DepthToSpaceMode, SpaceToDepth};
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;

use reference::Nd;
use support::{Rng, Tol, check, global, nd, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// `y[n, c, h·b + i, w·b + j] = x[n, channel, h, w]` with the channel of `(c, i, j)` per
/// mode.
fn depth_to_space(x: &Nd, b: usize, mode: DepthToSpaceMode) -> Nd {
    let [n, c, h, w] = x.shape[..] else {
        unreachable!("rank 4")
    };
    let cb = c / (b * b);
    Nd::from_fn(vec![n, cb, h * b, w * b], |idx| {
        let (i, j) = (idx[2] % b, idx[3] % b);
        let channel = match mode {
            DepthToSpaceMode::Dcr => (i * b + j) * cb + idx[1],
            DepthToSpaceMode::Crd => idx[1] * b * b + i * b + j,
        };
        x.at(&[idx[0], channel, idx[2] / b, idx[3] / b])
    })
}

fn any_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

fn mode() -> impl Strategy<Value = DepthToSpaceMode> {
    proptest::sample::select(vec![DepthToSpaceMode::Dcr, DepthToSpaceMode::Crd])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        (n, cb, h, w) in (1usize..=2, 1usize..=3, 1usize..=4, 1usize..=4),
        b in 1usize..=3,
        mode in mode(),
        dtype in any_dtype(),
        seed: u64,
    ) {
        let x = random(dtype, &[n, cb * b * b, h, w], &mut Rng::new(seed), -50.0, 50.0);
        let got = run(DepthToSpace { blocksize: b as i64, mode }, &[&x])?;
        check(&got, &depth_to_space(&nd(&x), b, mode), Tol::of(DType::I64))?;
    }

    #[test]
    fn inverts_space_to_depth(
        (n, c, h, w) in (1usize..=2, 1usize..=3, 1usize..=3, 1usize..=3),
        b in 1usize..=3,
        dtype in any_dtype(),
        seed: u64,
    ) {
        let x = random(dtype, &[n, c, h * b, w * b], &mut Rng::new(seed), -50.0, 50.0);
        let packed = run(SpaceToDepth { blocksize: b as i64 }, &[&x])?;
        let back = run(DepthToSpace { blocksize: b as i64, mode: DepthToSpaceMode::Dcr }, &[&packed])?;
        prop_assert_eq!(back, x);
    }
}

#[test]
fn symbolic_shapes() {
    let kind = LayerKind::from(DepthToSpace {
        blocksize: 2,
        mode: DepthToSpaceMode::Crd,
    });
    let symbolic = [BuildInput::new(DType::F16, &["n", "8", "h", "w"])];
    let out = infer(&kind, &symbolic).expect("infer");
    let bind = |s: &str| match s {
        "n" => Some(3),
        "h" => Some(5),
        "w" => Some(7),
        _ => None,
    };
    let dims: Vec<i64> = out[0]
        .1
        .iter()
        .map(|d| d.eval(&bind).expect("bound"))
        .collect();
    assert_eq!(dims, [3, 2, 10, 14]);
    let mut rng = Rng::new(1);
    let xs: Vec<_> = [[1, 8, 1, 2], [3, 8, 5, 7]]
        .iter()
        .map(|s| random(DType::F16, s, &mut rng, -1.0, 1.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x]).collect();
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    for (x, out) in xs.iter().zip(&got) {
        let want = depth_to_space(&nd(x), 2, DepthToSpaceMode::Crd);
        check(&out[0], &want, Tol::of(DType::I64)).expect("matches");
    }
    let symbolic_channels = [BuildInput::new(DType::F32, &["n", "c", "4", "4"])];
    assert_eq!(
        infer(&kind, &symbolic_channels).expect("c symbolic")[0].1[2..],
        sym(&["8", "8"])[..]
    );
}

#[test]
fn large_image_on_both_backends() {
    let mut rng = Rng::new(2);
    let x = random(DType::F32, &[2, 36, 40, 50], &mut rng, -1.0, 1.0);
    for mode in [DepthToSpaceMode::Dcr, DepthToSpaceMode::Crd] {
        let layer = DepthToSpace { blocksize: 3, mode };
        let want = depth_to_space(&nd(&x), 3, mode);
        for backend in [global(), support::pooled()] {
            let got = run_on(backend, layer.clone(), &[&x]).expect("run");
            check(&got[0], &want, Tol::of(DType::I64)).expect("matches");
        }
    }
}

#[test]
fn bad_inputs_are_errors() {
    let layer = |b| {
        LayerKind::from(DepthToSpace {
            blocksize: b,
            mode: DepthToSpaceMode::Dcr,
        })
    };
    let x = || BuildInput::new(DType::F32, &["1", "8", "2", "2"]);
    assert!(infer(&layer(0), &[x()]).is_err());
    assert!(infer(&layer(3), &[x()]).is_err());
    assert!(infer(&layer(i64::MAX), &[x()]).is_err());
    assert!(infer(&layer(2), &[BuildInput::new(DType::F32, &["8", "2", "2"])]).is_err());
    let mut rng = Rng::new(3);
    let t = random(DType::F32, &[1, 6, 2, 2], &mut rng, -1.0, 1.0);
    assert!(run_on(global(), layer(2), &[&t]).is_err());
}

#[test]
fn engine_round_trip_with_dynamic_image_size() {
    let layer = DepthToSpace {
        blocksize: 2,
        mode: DepthToSpaceMode::Crd,
    };
    let inputs = [(
        "x",
        DType::U8,
        vec![
            Dim::Fixed(1),
            Dim::Fixed(8),
            Dim::dynamic("h", 1, 2, 4),
            Dim::Fixed(3),
        ],
    )];
    let mut rng = Rng::new(13);
    let xs: Vec<_> = [1, 4]
        .iter()
        .map(|&h| random(DType::U8, &[1, 8, h, 3], &mut rng, 0.0, 200.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x]).collect();
    let got = run_engine(layer.into(), &inputs, &runs).expect("engine");
    for (x, out) in xs.iter().zip(&got) {
        let want = depth_to_space(&nd(x), 2, DepthToSpaceMode::Crd);
        check(&out[0], &want, Tol::of(DType::I64)).expect("matches");
    }
}
