//! The normalization converters against plain references on random data: BatchNorm with
//! constant (folded) and run-time parameters, InstanceNorm through its plugin and through
//! layers, LayerNorm with its statistics outputs, GroupNorm of opsets 18 and 21 with
//! dynamic dims, and LpNormalization's zero-norm rule.

mod common;
mod compute;

use common::{f32_init, int, model, node, value};
use compute::{check, coords, fail, float, import, random, run, values};
use proptest::prelude::*;
use torchtrt::Tensor;
use torchtrt_core::layers::LayerKind;

fn dims(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

/// A shape `[N, C, spatial…]` with 0 to 2 spatial dims.
fn nc_shape(min_spatial: usize) -> impl Strategy<Value = Vec<usize>> {
    (
        1usize..=3,
        1usize..=4,
        prop::collection::vec(1usize..=5, min_spatial..=2),
    )
        .prop_map(|(n, c, s)| [&[n, c][..], &s].concat())
}

/// Mean and population variance of `x` over the elements where `group(i)` is `g`, for
/// every group `0..groups`.
fn stats(x: &[f64], groups: usize, group: impl Fn(usize) -> usize) -> Vec<(f64, f64)> {
    let mut sum = vec![(0.0, 0.0, 0.0); groups];
    for (i, &v) in x.iter().enumerate() {
        let s = &mut sum[group(i)];
        *s = (s.0 + v, s.1 + v * v, s.2 + 1.0);
    }
    sum.into_iter()
        .map(|(s, s2, n)| {
            let mean = s / n;
            (mean, (s2 / n - mean * mean).max(0.0))
        })
        .collect()
}

/// Positive variances.
fn positive(t: &Tensor) -> Tensor {
    let v: Vec<f32> = t
        .to_f64_vec()
        .iter()
        .map(|v| v.abs() as f32 + 0.1)
        .collect();
    Tensor::from_vec(t.shape(), v).expect("same shape")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn batch_norm_folds_constants_and_computes_run_time_parameters(
        shape in nc_shape(0), constant: bool, eps in 1e-5f32..0.1, seed: u64,
    ) {
        let c = shape[1];
        let x = random(&shape, seed);
        let p: Vec<Tensor> = (1..=4).map(|i| random(&[c], seed ^ i)).collect();
        let p = [p[0].clone(), p[1].clone(), p[2].clone(), positive(&p[3])];
        let names = ["s", "b", "m", "v"];
        let bn = node("BatchNormalization", &["x", "s", "b", "m", "v"], &["y"], vec![float("epsilon", eps)]);
        let mut inputs = vec![value("x", 1, &dims(&shape))];
        let mut inits = Vec::new();
        let mut feeds: Vec<(&str, &Tensor)> = vec![("x", &x)];
        for (name, t) in names.iter().zip(&p) {
            let v: Vec<f32> = t.to_f64_vec().iter().map(|&v| v as f32).collect();
            if constant {
                inits.push(f32_init(name, &[c as i64], &v));
            } else {
                inputs.push(value(name, 1, &[c as i64]));
                feeds.push((name, t));
            }
        }
        let mdl = model(vec![bn], inits, inputs, vec![value("y", 1, &[])], 15);
        let got = run(&mdl, &feeds, &[("x", 0)]).map_err(fail)?;
        let [s, b, m, v] = p.map(|t| values(&t));
        let inner: usize = shape[2..].iter().product();
        let want: Vec<f64> = values(&x)
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let ch = i / inner % c;
                (xv - m[ch]) / (v[ch] + f64::from(eps)).sqrt() * s[ch] + b[ch]
            })
            .collect();
        check(&got[0], &shape, &want, 1e-4)?;
    }

    #[test]
    fn instance_norm_plugin_and_layer_paths_match_the_reference(
        shape in nc_shape(1), constant: bool, seed: u64,
    ) {
        let c = shape[1];
        let (x, s, b) = (random(&shape, seed), random(&[c], seed ^ 1), random(&[c], seed ^ 2));
        let node = node("InstanceNormalization", &["x", "s", "b"], &["y"], vec![float("epsilon", 1e-3)]);
        let f32s = |t: &Tensor| t.to_f64_vec().iter().map(|&v| v as f32).collect::<Vec<_>>();
        let (mdl, feeds) = if constant {
            let inits = vec![f32_init("s", &[c as i64], &f32s(&s)), f32_init("b", &[c as i64], &f32s(&b))];
            (model(vec![node], inits, vec![value("x", 1, &dims(&shape))], vec![value("y", 1, &[])], 22), vec![("x", &x)])
        } else {
            let inputs = vec![value("x", 1, &dims(&shape)), value("s", 1, &[c as i64]), value("b", 1, &[c as i64])];
            (model(vec![node], vec![], inputs, vec![value("y", 1, &[])], 22), vec![("x", &x), ("s", &s), ("b", &b)])
        };
        let net = import(&mdl, &feeds, &[("x", 0)]).map_err(fail)?;
        let plugin = net.layers().iter().any(|l| matches!(l.kind, LayerKind::Plugin(_)));
        prop_assert_eq!(plugin, constant);
        let got = run(&mdl, &feeds, &[("x", 0)]).map_err(fail)?;
        let inner: usize = shape[2..].iter().product();
        let st = stats(&values(&x), shape[0] * c, |i| i / inner);
        let (s, b) = (values(&s), values(&b));
        let want: Vec<f64> = values(&x)
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let (mean, var) = st[i / inner];
                let ch = i / inner % c;
                (xv - mean) / (var + 1e-3).sqrt() * s[ch] + b[ch]
            })
            .collect();
        check(&got[0], &shape, &want, 1e-4)?;
    }

    #[test]
    fn layer_norm_with_mean_and_inv_std_dev(
        shape in prop::collection::vec(1usize..=4, 2..=4), axis_pick: prop::sample::Index, seed: u64,
    ) {
        let rank = shape.len();
        let axis = axis_pick.index(2 * rank) as i64 - rank as i64;
        let first = axis.rem_euclid(rank as i64) as usize;
        let tail = &shape[first..];
        let (x, s, b) = (random(&shape, seed), random(tail, seed ^ 1), random(tail, seed ^ 2));
        let mdl = model(
            vec![node("LayerNormalization", &["x", "s", "b"], &["y", "mean", "inv"], vec![int("axis", axis), float("epsilon", 1e-3)])],
            vec![],
            vec![value("x", 1, &dims(&shape)), value("s", 1, &dims(tail)), value("b", 1, &dims(tail))],
            vec![value("y", 1, &[]), value("mean", 1, &[]), value("inv", 1, &[])],
            17,
        );
        let got = run(&mdl, &[("x", &x), ("s", &s), ("b", &b)], &[("x", 0)]).map_err(fail)?;
        let inner: usize = tail.iter().product();
        let outer: usize = shape[..first].iter().product();
        let st = stats(&values(&x), outer, |i| i / inner);
        let (sv, bv) = (values(&s), values(&b));
        let want: Vec<f64> = values(&x)
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let (mean, var) = st[i / inner];
                (xv - mean) / (var + 1e-3).sqrt() * sv[i % inner] + bv[i % inner]
            })
            .collect();
        check(&got[0], &shape, &want, 1e-4)?;
        let kept: Vec<usize> = shape.iter().enumerate().map(|(d, &n)| if d < first { n } else { 1 }).collect();
        let means: Vec<f64> = st.iter().map(|s| s.0).collect();
        let invs: Vec<f64> = st.iter().map(|s| 1.0 / (s.1 + 1e-3).sqrt()).collect();
        check(&got[1], &kept, &means, 1e-4)?;
        check(&got[2], &kept, &invs, 1e-4)?;
    }

    #[test]
    fn group_norm_per_group_and_per_channel_affine(
        (n, groups, per_group) in (1usize..=3, 1usize..=3, 1usize..=3),
        spatial in prop::collection::vec(1usize..=4, 0..=2),
        opset in prop::sample::select(vec![18i64, 21]),
        seed: u64,
    ) {
        let c = groups * per_group;
        let shape = [&[n, c][..], &spatial].concat();
        let affine = if opset == 18 { groups } else { c };
        let (x, s, b) = (random(&shape, seed), random(&[affine], seed ^ 1), random(&[affine], seed ^ 2));
        let mdl = model(
            vec![node("GroupNormalization", &["x", "s", "b"], &["y"], vec![int("num_groups", groups as i64), float("epsilon", 1e-3)])],
            vec![],
            vec![value("x", 1, &dims(&shape)), value("s", 1, &[affine as i64]), value("b", 1, &[affine as i64])],
            vec![value("y", 1, &[])],
            opset,
        );
        let dynamic: Vec<(&str, usize)> = (0..shape.len()).filter(|&d| d != 1).map(|d| ("x", d)).collect();
        let got = run(&mdl, &[("x", &x), ("s", &s), ("b", &b)], &dynamic).map_err(fail)?;
        let inner: usize = spatial.iter().product();
        let st = stats(&values(&x), n * groups, |i| i / (inner * per_group));
        let (sv, bv) = (values(&s), values(&b));
        let want: Vec<f64> = values(&x)
            .iter()
            .enumerate()
            .map(|(i, &xv)| {
                let (mean, var) = st[i / (inner * per_group)];
                let ch = i / inner % c;
                let a = if opset == 18 { ch / per_group } else { ch };
                (xv - mean) / (var + 1e-3).sqrt() * sv[a] + bv[a]
            })
            .collect();
        check(&got[0], &shape, &want, 1e-4)?;
    }

    #[test]
    fn lp_normalization_gives_zero_for_zero_norms(
        shape in prop::collection::vec(1usize..=4, 1..=3), axis_pick: prop::sample::Index, p in 1i64..=2, seed: u64,
    ) {
        let rank = shape.len();
        let axis = axis_pick.index(rank);
        let mut xv = values(&random(&shape, seed));
        for (i, v) in xv.iter_mut().enumerate() {
            if coords(i, &shape).iter().enumerate().any(|(d, &c)| d != axis && c == 0) {
                *v = 0.0;
            }
        }
        let x = Tensor::from_vec(&shape, xv.iter().map(|&v| v as f32).collect()).map_err(|e| fail(e.to_string()))?;
        let mdl = model(
            vec![node("LpNormalization", &["x"], &["y"], vec![int("axis", axis as i64), int("p", p)])],
            vec![],
            vec![value("x", 1, &dims(&shape))],
            vec![value("y", 1, &[])],
            22,
        );
        let got = run(&mdl, &[("x", &x)], &[]).map_err(fail)?;
        let line = |i: usize| {
            let mut c = coords(i, &shape);
            c[axis] = 0;
            c
        };
        let want: Vec<f64> = xv
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let norm = xv
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| line(*j) == line(i))
                    .map(|(_, &u)| if p == 1 { u.abs() } else { u * u })
                    .sum::<f64>();
                let norm = if p == 1 { norm } else { norm.sqrt() };
                if norm == 0.0 { 0.0 } else { v / norm }
            })
            .collect();
        check(&got[0], &shape, &want, 1e-4)?;
    }
}
