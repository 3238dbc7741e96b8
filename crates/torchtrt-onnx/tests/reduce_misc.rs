//! Reductions with axes given at run time, bool max/min, `noop_with_empty_axes`,
//! SpaceToDepth's CRD order with dynamic dims, and TopK with a run-time `k`, against plain
//! references on random data.

mod common;
mod compute;

use common::{i64_init, int, model, node, string, value};
use compute::{check, coords, fail, flat, random, run, values};
use proptest::prelude::*;
use torchtrt::Tensor;
use torchtrt_core::plugin_api::DType;

fn dims(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

const OPS: [&str; 10] = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSumExp",
    "ReduceLogSum",
];

/// `op` over the elements of `x` sharing their coordinates outside `axes`.
fn reduce_ref(
    op: &str,
    x: &[f64],
    shape: &[usize],
    axes: &[usize],
    keep: bool,
) -> (Vec<usize>, Vec<f64>) {
    let kept: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if axes.contains(&d) { 1 } else { n })
        .collect();
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); kept.iter().product()];
    for (i, &v) in x.iter().enumerate() {
        let mut c = coords(i, shape);
        axes.iter().for_each(|&a| c[a] = 0);
        groups[flat(&c, &kept)].push(v);
    }
    let out = groups
        .iter()
        .map(|g| match op {
            "ReduceSum" => g.iter().sum(),
            "ReduceMean" => g.iter().sum::<f64>() / g.len() as f64,
            "ReduceMax" => g.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            "ReduceMin" => g.iter().copied().fold(f64::INFINITY, f64::min),
            "ReduceProd" => g.iter().product(),
            "ReduceL1" => g.iter().map(|v| v.abs()).sum(),
            "ReduceL2" => g.iter().map(|v| v * v).sum::<f64>().sqrt(),
            "ReduceSumSquare" => g.iter().map(|v| v * v).sum(),
            "ReduceLogSumExp" => g.iter().map(|v| v.exp()).sum::<f64>().ln(),
            _ => g.iter().sum::<f64>().ln(),
        })
        .collect();
    let shape = if keep {
        kept
    } else {
        shape
            .iter()
            .enumerate()
            .filter(|(d, _)| !axes.contains(d))
            .map(|(_, &n)| n)
            .collect()
    };
    (shape, out)
}

/// A shape and a non-empty subset of its axes, some written negative, in random order.
fn shape_and_axes() -> impl Strategy<Value = (Vec<usize>, Vec<i64>)> {
    prop::collection::vec(1usize..=4, 1..=4).prop_flat_map(|shape| {
        let rank = shape.len();
        let axes =
            prop::sample::subsequence((0..rank).collect::<Vec<_>>(), 1..=rank).prop_shuffle();
        (
            Just(shape),
            axes,
            prop::collection::vec(any::<bool>(), rank),
        )
            .prop_map(move |(shape, axes, neg)| {
                let axes = axes
                    .iter()
                    .map(|&a| {
                        if neg[a] {
                            a as i64 - rank as i64
                        } else {
                            a as i64
                        }
                    })
                    .collect();
                (shape, axes)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn reductions_with_axes_given_at_run_time(
        op in prop::sample::select(OPS.to_vec()),
        (shape, axes) in shape_and_axes(),
        keep: bool,
        seed: u64,
    ) {
        let x = random(&shape, seed);
        let x = match op {
            "ReduceProd" | "ReduceLogSum" => {
                let v: Vec<f32> = values(&x).iter().map(|v| (v.abs() * 0.5 + 0.5) as f32).collect();
                Tensor::from_vec(&shape, v).map_err(|e| fail(e.to_string()))?
            }
            _ => x,
        };
        let axes_t = Tensor::from_slice(&[axes.len()], &axes).map_err(|e| fail(e.to_string()))?;
        let mdl = model(
            vec![node(op, &["x", "axes"], &["y"], vec![int("keepdims", keep as i64)])],
            vec![],
            vec![value("x", 1, &dims(&shape)), value("axes", 7, &[axes.len() as i64])],
            vec![value("y", 1, &[])],
            18,
        );
        let got = run(&mdl, &[("x", &x), ("axes", &axes_t)], &[("x", 0)]).map_err(fail)?;
        let resolved: Vec<usize> = axes.iter().map(|&a| a.rem_euclid(shape.len() as i64) as usize).collect();
        let (want_shape, want) = reduce_ref(op, &values(&x), &shape, &resolved, keep);
        check(&got[0], &want_shape, &want, 1e-4)?;
    }

    #[test]
    fn space_to_depth_crd_with_dynamic_dims(
        (n, c, h, w, b) in (1usize..=2, 1usize..=3, 1usize..=3, 1usize..=3, 1usize..=3),
        crd: bool,
        seed: u64,
    ) {
        let shape = [n, c, h * b, w * b];
        let x = random(&shape, seed);
        let mode = if crd { "CRD" } else { "DCR" };
        let mdl = model(
            vec![node("SpaceToDepth", &["x"], &["y"], vec![int("blocksize", b as i64), string("mode", mode)])],
            vec![],
            vec![value("x", 1, &dims(&shape))],
            vec![value("y", 1, &[])],
            28,
        );
        let got = run(&mdl, &[("x", &x)], &[("x", 0), ("x", 2), ("x", 3)]).map_err(fail)?;
        let out = [n, c * b * b, h, w];
        let xv = values(&x);
        let want: Vec<f64> = (0..xv.len())
            .map(|i| {
                let [ni, oc, hi, wi] = coords(i, &out)[..] else { unreachable!() };
                let (ci, block) = if crd { (oc / (b * b), oc % (b * b)) } else { (oc % c, oc / c) };
                xv[flat(&[ni, ci, hi * b + block / b, wi * b + block % b], &shape)]
            })
            .collect();
        check(&got[0], &out, &want, 0.0)?;
    }

    #[test]
    fn top_k_with_k_given_at_run_time(
        rows in 1usize..=3, len in 1usize..=8, k_pick: prop::sample::Index, largest: bool, seed: u64,
    ) {
        let k = k_pick.index(len) + 1;
        let x = random(&[rows, len], seed);
        let k_t = Tensor::from_slice(&[1], &[k as i64]).map_err(|e| fail(e.to_string()))?;
        let mdl = model(
            vec![node("TopK", &["x", "k"], &["v", "i"], vec![int("largest", largest as i64)])],
            vec![],
            vec![value("x", 1, &[rows as i64, len as i64]), value("k", 7, &[1])],
            vec![value("v", 1, &[]), value("i", 7, &[])],
            11,
        );
        let got = run(&mdl, &[("x", &x), ("k", &k_t)], &[]).map_err(fail)?;
        let xv = values(&x);
        let (mut want_v, mut want_i) = (Vec::new(), Vec::new());
        for r in 0..rows {
            let mut idx: Vec<usize> = (0..len).collect();
            let row = &xv[r * len..(r + 1) * len];
            idx.sort_by(|&a, &b| {
                let o = row[a].total_cmp(&row[b]);
                (if largest { o.reverse() } else { o }).then(a.cmp(&b))
            });
            want_v.extend(idx[..k].iter().map(|&j| row[j]));
            want_i.extend(idx[..k].iter().map(|&j| j as f64));
        }
        check(&got[0], &[rows, k], &want_v, 0.0)?;
        prop_assert_eq!(got[1].dtype(), DType::I64);
        check(&got[1], &[rows, k], &want_i, 0.0)?;
    }
}

#[test]
fn empty_axes_reduce_everything_or_nothing() {
    let x = random(&[2, 3], 7);
    let xv = values(&x);
    for noop in [0, 1] {
        let mdl = model(
            vec![node(
                "ReduceSum",
                &["x", "axes"],
                &["y"],
                vec![int("noop_with_empty_axes", noop)],
            )],
            vec![i64_init("axes", &[0], &[])],
            vec![value("x", 1, &[2, 3])],
            vec![value("y", 1, &[])],
            13,
        );
        let got = run(&mdl, &[("x", &x)], &[]).expect("runs");
        if noop == 1 {
            check(&got[0], &[2, 3], &xv, 0.0).expect("identity");
        } else {
            check(&got[0], &[1, 1], &[xv.iter().sum()], 1e-5).expect("sum of all");
        }
    }
}

#[test]
fn bool_max_and_min_are_any_and_all() {
    let x = Tensor::from_bytes(DType::Bool, &[2, 3], &[1, 0, 1, 1, 1, 1]).expect("bool tensor");
    for (op, want) in [("ReduceMax", [1.0, 1.0]), ("ReduceMin", [0.0, 1.0])] {
        let mdl = model(
            vec![node(
                op,
                &["x"],
                &["y"],
                vec![common::ints("axes", &[1]), int("keepdims", 0)],
            )],
            vec![],
            vec![value("x", 9, &[2, 3])],
            vec![value("y", 9, &[])],
            13,
        );
        let got = run(&mdl, &[("x", &x)], &[]).expect("runs");
        assert_eq!(got[0].dtype(), DType::Bool);
        check(&got[0], &[2], &want, 0.0).expect("any / all");
    }
}

#[test]
fn axes_of_unknown_length_are_refused_by_name() {
    let x = random(&[2, 3], 8);
    let axes = Tensor::from_slice(&[1], &[1i64]).expect("axes");
    let mdl = model(
        vec![node("ReduceMean", &["x", "axes"], &["y"], vec![])],
        vec![],
        vec![value("x", 1, &[2, 3]), value("axes", 7, &[1])],
        vec![value("y", 1, &[])],
        18,
    );
    let err = run(&mdl, &[("x", &x), ("axes", &axes)], &[("axes", 0)]).unwrap_err();
    assert!(
        err.contains("ReduceMean_y") && err.contains("axes"),
        "{err}"
    );
}
