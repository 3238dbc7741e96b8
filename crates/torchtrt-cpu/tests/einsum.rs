//! Einsum against a reference that loops over every assignment of every label: matrix
//! products (the gemm path), diagonals, traces, sums, outer products, three inputs,
//! broadcast ellipses, implicit outputs; float and integer dtypes; symbolic shapes; and
//! malformed equations.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use std::collections::BTreeMap;

use proptest::prelude::*;
use torchtrt_core::LayerKind;
use torchtrt_core::layers::Einsum;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;

use reference::{Nd, indices};
use support::{Rng, Tol, check, global, nd, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// The labels of each dim of a term, `...` expanded to the digits `'0'…` standing for the
/// last `rank − letters` of the `ellipsis` broadcast dims.
fn expand(term: &str, rank: usize, ellipsis: usize) -> Vec<char> {
    match term.split_once("...") {
        None => term.chars().collect(),
        Some((head, tail)) => {
            let e = rank - head.len() - tail.len();
            let digits = (ellipsis - e..ellipsis).map(|d| char::from(b'0' + d as u8));
            head.chars().chain(digits).chain(tail.chars()).collect()
        }
    }
}

/// `out[o…] = Σ Π x_t[labels of t]` over all labels not in the output; `equation` must
/// be explicit (`->`).
fn einsum(equation: &str, xs: &[Nd]) -> Nd {
    let (lhs, rhs) = equation.split_once("->").expect("explicit equation");
    let terms: Vec<&str> = lhs.split(',').collect();
    let named = |t: &str| t.replace("...", "").len();
    let ellipsis = terms
        .iter()
        .zip(xs)
        .map(|(t, x)| x.shape.len() - named(t))
        .max()
        .unwrap_or(0);
    let labels: Vec<Vec<char>> = terms
        .iter()
        .zip(xs)
        .map(|(t, x)| expand(t, x.shape.len(), ellipsis))
        .collect();
    let mut size: BTreeMap<char, usize> = BTreeMap::new();
    for (ls, x) in labels.iter().zip(xs) {
        for (&l, &d) in ls.iter().zip(&x.shape) {
            let s = size.entry(l).or_insert(d);
            *s = (*s).max(d);
        }
    }
    let out_labels = expand(rhs, ellipsis + named(rhs), ellipsis);
    let all: Vec<char> = size.keys().copied().collect();
    let extents: Vec<usize> = all.iter().map(|l| size[l]).collect();
    let out_shape: Vec<usize> = out_labels.iter().map(|l| size[l]).collect();
    let mut out = Nd::from_fn(out_shape.clone(), |_| 0.0);
    for assignment in indices(&extents) {
        let value_of = |l: &char| assignment[all.iter().position(|a| a == l).expect("label")];
        let mut p = 1.0;
        for (ls, x) in labels.iter().zip(xs) {
            let idx: Vec<usize> = ls
                .iter()
                .zip(&x.shape)
                .map(|(l, &d)| if d == 1 { 0 } else { value_of(l) })
                .collect();
            p *= x.at(&idx);
        }
        let o: Vec<usize> = out_labels.iter().map(value_of).collect();
        out.data[reference::ravel(&o, &out_shape)] += p;
    }
    out
}

/// Explicit equations exercised on random sizes.
const EQUATIONS: &[&str] = &[
    "ij,jk->ik",
    "bij,bjk->bik",
    "bij,bkj->bik",
    "ab,ab->ab",
    "ab,ba->a",
    "ij->ji",
    "ii->i",
    "ii->",
    "bii->bi",
    "iij,jk->ik",
    "ij->",
    "ij->j",
    "i,j->ij",
    "i,i->",
    "ij,jk,kl->il",
    "abc,cd,b->ad",
    "i,i,i->i",
    "...ij,...jk->...ik",
    "...ii->...i",
    "b...,b...->...",
    "ij...,jk->ik...",
    "...,...->...",
];

/// Random input shapes for `equation`: a size per letter, and ellipsis dims broadcast
/// (each input keeps a suffix of them, some turned to 1).
fn shapes(equation: &str, rng: &mut Rng) -> Vec<Vec<usize>> {
    let lhs = equation.split_once("->").map_or(equation, |(l, _)| l);
    let mut size: BTreeMap<char, usize> = BTreeMap::new();
    let ellipsis: Vec<usize> = (0..rng.int(0, 2)).map(|_| rng.int(1, 3) as usize).collect();
    lhs.split(',')
        .map(|t| {
            let (head, tail) = t.split_once("...").unwrap_or((t, ""));
            let mut dim =
                |c: char, rng: &mut Rng| *size.entry(c).or_insert_with(|| rng.int(1, 4) as usize);
            let mut s: Vec<usize> = head.chars().map(|c| dim(c, rng)).collect();
            if t.contains("...") {
                let keep = rng.int(0, ellipsis.len() as i64) as usize;
                let keep = if rng.coin() { ellipsis.len() } else { keep };
                s.extend(
                    ellipsis[ellipsis.len() - keep..]
                        .iter()
                        .map(|&d| if rng.int(0, 3) == 0 { 1 } else { d }),
                );
            }
            s.extend(tail.chars().map(|c| dim(c, rng)));
            s
        })
        .collect()
}

fn numeric_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(vec![
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::I16,
    ])
}

/// Runs `equation` on random inputs of `dtype` and checks it against the reference of
/// `explicit` (the same equation with its output spelled out).
fn check_equation(
    equation: &str,
    explicit: &str,
    dtype: DType,
    rng: &mut Rng,
) -> Result<(), TestCaseError> {
    let xs: Vec<_> = shapes(explicit, rng)
        .iter()
        .map(|s| random(dtype, s, rng, -3.0, 3.0))
        .collect();
    let refs: Vec<_> = xs.iter().collect();
    let got = run(
        Einsum {
            equation: equation.into(),
        },
        &refs,
    )?;
    let want = einsum(explicit, &xs.iter().map(nd).collect::<Vec<_>>());
    let terms = want.data.len().max(1);
    let summed = xs.iter().map(|x| x.numel()).product::<usize>() / terms;
    check(
        &got,
        &want,
        Tol::of(dtype).scaled(3.0 * summed.max(1) as f64),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_reference(pick in 0..EQUATIONS.len(), dtype in numeric_dtype(), seed: u64) {
        let eq = EQUATIONS[pick];
        check_equation(eq, eq, dtype, &mut Rng::new(seed))?;
    }

    #[test]
    fn implicit_outputs(dtype in numeric_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        for (implicit, explicit) in [
            ("ij,jk", "ij,jk->ik"),
            ("ba", "ba->ab"),
            ("ii", "ii->"),
            ("aB", "aB->Ba"),
            ("...ij,jk", "...ij,jk->...ik"),
            (" i j , j k -> i k ", "ij,jk->ik"),
        ] {
            check_equation(implicit, explicit, dtype, &mut rng)?;
        }
    }
}

#[test]
fn large_products_on_both_backends() {
    let mut rng = Rng::new(7);
    for (eq, a, b) in [
        ("bij,bjk->bik", vec![4, 64, 80], vec![4, 80, 48]),
        ("ij,kj->ik", vec![300, 70], vec![200, 70]),
        ("bhqd,bhkd->bhqk", vec![2, 3, 40, 16], vec![2, 3, 50, 16]),
    ] {
        for dtype in [DType::F32, DType::BF16] {
            let x = random(dtype, &a, &mut rng, -1.0, 1.0);
            let y = random(dtype, &b, &mut rng, -1.0, 1.0);
            let want = einsum(eq, &[nd(&x), nd(&y)]);
            let k = a.last().copied().unwrap_or(1) as f64;
            for backend in [global(), support::pooled()] {
                let layer = Einsum {
                    equation: eq.into(),
                };
                let got = run_on(backend, layer, &[&x, &y]).expect("run");
                check(&got[0], &want, Tol::of(dtype).scaled(k.sqrt() * 3.0)).expect(eq);
            }
        }
    }
}

#[test]
fn shape_rule_on_symbolic_dims() {
    let bmm = LayerKind::from(Einsum {
        equation: "bij,bjk->bik".into(),
    });
    let inputs = [
        BuildInput::new(DType::F32, &["B", "I", "8"]),
        BuildInput::new(DType::F32, &["B", "8", "K"]),
    ];
    assert_eq!(
        infer(&bmm, &inputs).expect("bmm"),
        [(DType::F32, sym(&["B", "I", "K"]))]
    );
    let implicit = LayerKind::from(Einsum {
        equation: "...ij,jk".into(),
    });
    let inputs = [
        BuildInput::new(DType::F16, &["n", "2", "3", "4"]),
        BuildInput::new(DType::F16, &["4", "m"]),
    ];
    assert_eq!(
        infer(&implicit, &inputs).expect("implicit"),
        [(DType::F16, sym(&["n", "2", "3", "m"]))]
    );
    let broadcast = LayerKind::from(Einsum {
        equation: "...i,...i->...".into(),
    });
    let inputs = [
        BuildInput::new(DType::I32, &["n", "1", "3"]),
        BuildInput::new(DType::I32, &["5", "3"]),
    ];
    assert_eq!(
        infer(&broadcast, &inputs).expect("broadcast"),
        [(DType::I32, sym(&["n", "5"]))]
    );
    let no_ellipsis_dims = LayerKind::from(Einsum {
        equation: "...ij->ij".into(),
    });
    assert!(
        infer(
            &no_ellipsis_dims,
            &[BuildInput::new(DType::F32, &["2", "3"])]
        )
        .is_ok()
    );
}

#[test]
fn prepared_for_symbolic_shapes_runs_on_several() {
    let kind = LayerKind::from(Einsum {
        equation: "bij,bjk->bik".into(),
    });
    let symbolic = [
        BuildInput::new(DType::F32, &["B", "I", "J"]),
        BuildInput::new(DType::F32, &["B", "J", "K"]),
    ];
    let mut rng = Rng::new(3);
    let shapes = [
        ([1, 2, 3], [1, 3, 4]),
        ([5, 1, 7], [5, 7, 2]),
        ([2, 4, 1], [2, 1, 1]),
    ];
    let xs: Vec<_> = shapes
        .iter()
        .map(|(a, b)| {
            (
                random(DType::F32, a, &mut rng, -1.0, 1.0),
                random(DType::F32, b, &mut rng, -1.0, 1.0),
            )
        })
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|(a, b)| vec![a, b]).collect();
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    for ((a, b), out) in xs.iter().zip(&got) {
        let want = einsum("bij,bjk->bik", &[nd(a), nd(b)]);
        check(&out[0], &want, Tol::of(DType::F32).scaled(8.0)).expect("matches");
    }
}

#[test]
fn malformed_equations_are_errors() {
    let f = |dims: &[&str]| BuildInput::new(DType::F32, dims);
    let cases: Vec<(&str, Vec<BuildInput>, &str)> = vec![
        ("ij,jk->ik", vec![f(&["2", "3"])], "terms"),
        ("ij->ji", vec![f(&["2", "3", "4"])], "rank"),
        ("i$->i", vec![f(&["2", "3"])], "character"),
        ("ij->ii", vec![f(&["2", "3"])], "repeats"),
        ("ij->k", vec![f(&["2", "3"])], "no input"),
        ("...ij->ij", vec![f(&["4", "2", "3"])], "..."),
        ("i...j...->ij", vec![f(&["2", "3"])], "..."),
        ("ij,jk->ik", vec![f(&["2", "3"]), f(&["4", "5"])], "label"),
        ("ii->i", vec![f(&["2", "3"])], "label"),
        ("ij->i-", vec![f(&["2", "3"])], "character"),
        (
            "...i,...i->...",
            vec![f(&["2", "3"]), f(&["4", "3"])],
            "broadcast",
        ),
    ];
    for (equation, inputs, needle) in cases {
        let kind = LayerKind::from(Einsum {
            equation: equation.into(),
        });
        let err = infer(&kind, &inputs).expect_err(equation);
        assert!(err.contains(needle), "{equation}: {err}");
    }
    let mixed = [
        BuildInput::new(DType::F32, &["2"]),
        BuildInput::new(DType::F16, &["2"]),
    ];
    let dot = LayerKind::from(Einsum {
        equation: "i,i->".into(),
    });
    assert!(infer(&dot, &mixed).is_err());
    assert!(
        infer(
            &dot,
            &[
                BuildInput::new(DType::Bool, &["2"]),
                BuildInput::new(DType::Bool, &["2"])
            ]
        )
        .is_err()
    );
    let mut rng = Rng::new(4);
    let a = random(DType::F32, &[2, 3], &mut rng, -1.0, 1.0);
    let b = random(DType::F32, &[4, 5], &mut rng, -1.0, 1.0);
    assert!(
        run_on(
            global(),
            Einsum {
                equation: "ij,jk->ik".into()
            },
            &[&a, &b]
        )
        .is_err()
    );
}

#[test]
fn engine_round_trip_with_dynamic_batch() {
    let equation = "...ij,jk->...ik";
    let inputs = [
        (
            "a",
            DType::F32,
            vec![Dim::dynamic("b", 1, 2, 4), Dim::Fixed(3), Dim::Fixed(5)],
        ),
        ("w", DType::F32, vec![Dim::Fixed(5), Dim::Fixed(2)]),
    ];
    let mut rng = Rng::new(16);
    let w = random(DType::F32, &[5, 2], &mut rng, -1.0, 1.0);
    let xs: Vec<_> = [1, 4]
        .iter()
        .map(|&b| random(DType::F32, &[b, 3, 5], &mut rng, -1.0, 1.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x, &w]).collect();
    let layer = Einsum {
        equation: equation.into(),
    };
    let got = run_engine(layer.into(), &inputs, &runs).expect("engine");
    for (x, out) in xs.iter().zip(&got) {
        let want = einsum(equation, &[nd(x), nd(&w)]);
        check(&out[0], &want, Tol::of(DType::F32).scaled(4.0)).expect("matches");
    }
}
