//! Select (ONNX `Where`): three-way broadcasts for every dtype, shape rules on symbolic
//! inputs, and one kernel run on several dynamic shapes.

#[allow(dead_code)]
mod harness;
#[allow(dead_code)]
#[path = "reference/mod.rs"]
mod reference;
#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::Select;
use torchtrt_core::plugin_api::{DType, DimExpr};

use harness::{infer_one, run_prepared, sym};
use reference::Nd;
use support::{Rng, Tol, check, nd, random, run, shape};

/// A shape that broadcasts to `out`: some leading dims dropped, some dims set to 1.
fn part_of(out: &[usize], rng: &mut Rng) -> Vec<usize> {
    let drop = if rng.coin() {
        0
    } else {
        rng.int(0, out.len() as i64) as usize
    };
    out[drop..]
        .iter()
        .map(|&d| if rng.int(0, 2) == 0 { 1 } else { d })
        .collect()
}

/// `c ? x : y` at every index of `shape`, each read right-aligned with dims of 1 repeated.
fn choose(c: &Nd, x: &Nd, y: &Nd, shape: &[usize]) -> Nd {
    let at = |t: &Nd, idx: &[usize]| {
        let lead = idx.len() - t.shape.len();
        let src: Vec<usize> = t
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| if n == 1 { 0 } else { idx[lead + d] })
            .collect();
        t.at(&src)
    };
    Nd::from_fn(shape.to_vec(), |idx| {
        if at(c, idx) != 0.0 {
            at(x, idx)
        } else {
            at(y, idx)
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(
        out in shape(4, 5),
        dtype in select(DType::ALL.to_vec()),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let (cs, xs, ys) = (part_of(&out, &mut rng), part_of(&out, &mut rng), part_of(&out, &mut rng));
        let c = random(DType::Bool, &cs, &mut rng, 0.0, 1.0);
        let x = random(dtype, &xs, &mut rng, -100.0, 100.0);
        let y = random(dtype, &ys, &mut rng, -100.0, 100.0);
        let got = run(Select, &[&c, &x, &y])?;
        let rank = cs.len().max(xs.len()).max(ys.len());
        let full: Vec<usize> = (0..rank)
            .map(|i| {
                [&cs, &xs, &ys]
                    .iter()
                    .map(|s| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]))
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        check(&got, &choose(&nd(&c), &nd(&x), &nd(&y), &full), Tol::of(DType::I64))?;
    }
}

#[test]
fn shape_rules() {
    let c = (DType::Bool, sym(&["n", "1"]), None);
    let x = (DType::F32, sym(&["4"]), None);
    let y = (DType::F32, sym(&["1", "1"]), None);
    let ts = infer_one(Select, &[c.clone(), x.clone(), y.clone()]).unwrap();
    assert_eq!(ts.dtype, DType::F32);
    assert_eq!(ts.shape, vec![DimExpr::sym("n"), DimExpr::Const(4)]);
    let err = infer_one(Select, &[x.clone(), x.clone(), y.clone()]).unwrap_err();
    assert!(err.contains("bool"), "{err}");
    let err = infer_one(Select, &[c.clone(), x, (DType::F16, sym(&["4"]), None)]).unwrap_err();
    assert!(err.contains("share a dtype"), "{err}");
    let wide = (DType::F32, sym(&["1", "3"]), None);
    let err = infer_one(Select, &[c, (DType::F32, sym(&["4"]), None), wide]).unwrap_err();
    assert!(err.contains("broadcast"), "{err}");
}

#[test]
fn prepared_for_symbolic_dims() {
    let mut rng = Rng::new(12);
    let symbolic = [
        (DType::Bool, sym(&["n", "w"]), None),
        (DType::F16, sym(&["w"]), None),
        (DType::F16, sym(&["n", "1"]), None),
    ];
    for (n, w) in [(2, 3), (5, 40)] {
        let c = random(DType::Bool, &[n, w], &mut rng, 0.0, 1.0);
        let x = random(DType::F16, &[w], &mut rng, -1.0, 1.0);
        let y = random(DType::F16, &[n, 1], &mut rng, -1.0, 1.0);
        let out = run_prepared(Select, &symbolic, &[vec![&c, &x, &y]])
            .unwrap()
            .remove(0);
        check(
            &out,
            &choose(&nd(&c), &nd(&x), &nd(&y), &[n, w]),
            Tol::of(DType::F16),
        )
        .unwrap();
    }
}
