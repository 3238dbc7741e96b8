//! Deconvolution (ONNX `ConvTranspose`) against a direct scatter reference: 1-D to 3-D,
//! groups, strides, dilations, pads, output padding, bias, every float dtype, symbolic
//! shapes and bad inputs.

#[allow(dead_code)]
mod reference;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod symbolic;

use proptest::prelude::*;
use torchtrt_core::LayerKind;
use torchtrt_core::layers::Deconvolution;
use torchtrt_core::network::Dim;
use torchtrt_core::plugin_api::DType;

use reference::{Nd, indices};
use support::{Rng, Tol, check, float_dtype, global, nd, pooled, random, run, run_on};
use symbolic::{BuildInput, infer, run_engine, run_prepared, sym};

/// A transposed-convolution problem.
#[derive(Debug, Clone)]
struct Case {
    x: Vec<usize>,
    w: Vec<usize>,
    layer: Deconvolution,
    bias: bool,
}

/// `y[n, g·M/G + m, o…] = b + Σ x[n, c, i…] · w[c, m, k…]` over `o = i·s + k·d − pb`.
fn deconv(x: &Nd, w: &Nd, bias: Option<&Nd>, l: &Deconvolution) -> Nd {
    let spatial = x.shape.len() - 2;
    let groups = l.groups as usize;
    let (c_in, mg) = (w.shape[0], w.shape[1]);
    let cg = c_in / groups;
    let mut shape = vec![x.shape[0], mg * groups];
    for i in 0..spatial {
        let (s, d, k) = (l.strides[i], l.dilations[i], w.shape[2 + i] as i64);
        let n = s * (x.shape[2 + i] as i64 - 1) + l.output_padding[i] + (k - 1) * d + 1
            - l.pads_begin[i]
            - l.pads_end[i];
        shape.push(n as usize);
    }
    let mut y = Nd::from_fn(shape.clone(), |idx| bias.map_or(0.0, |b| b.data[idx[1]]));
    for xi in indices(&x.shape) {
        let (n, c) = (xi[0], xi[1]);
        let g = c / cg;
        for m in 0..mg {
            for k in indices(&w.shape[2..]) {
                let pos: Vec<i64> = (0..spatial)
                    .map(|i| {
                        xi[2 + i] as i64 * l.strides[i] + k[i] as i64 * l.dilations[i]
                            - l.pads_begin[i]
                    })
                    .collect();
                if pos
                    .iter()
                    .zip(&shape[2..])
                    .any(|(&p, &e)| p < 0 || p >= e as i64)
                {
                    continue;
                }
                let mut yi = vec![n, g * mg + m];
                yi.extend(pos.iter().map(|&p| p as usize));
                let mut wi = vec![c, m];
                wi.extend(&k);
                let at = reference::ravel(&yi, &shape);
                y.data[at] += x.at(&xi) * w.at(&wi);
            }
        }
    }
    y
}

fn cases() -> impl Strategy<Value = Case> {
    (1usize..=3, any::<u64>()).prop_map(|(spatial, seed)| {
        let mut rng = Rng::new(seed);
        let mut r = |lo: i64, hi: i64| rng.int(lo, hi);
        let groups = r(1, 3);
        let (cg, mg, batch) = (r(1, 3), r(1, 3), r(1, 2));
        let max_in = [0, 7, 5, 3][spatial];
        let mut layer = Deconvolution::new(spatial);
        layer.groups = groups;
        let mut x = vec![batch as usize, (cg * groups) as usize];
        let mut w = vec![(cg * groups) as usize, mg as usize];
        for i in 0..spatial {
            let (k, s, d) = (r(1, 3), r(1, 3), r(1, 2));
            let input = r(1, max_in);
            let full = s * (input - 1) + (k - 1) * d + 1;
            let op = r(0, s.max(d) - 1);
            let pb = r(0, (full - 1).min(2));
            let pe = r(0, (full + op - pb - 1).min(2));
            layer.strides[i] = s;
            layer.dilations[i] = d;
            layer.output_padding[i] = op;
            layer.pads_begin[i] = pb;
            layer.pads_end[i] = pe;
            x.push(input as usize);
            w.push(k as usize);
        }
        Case {
            x,
            w,
            layer,
            bias: r(0, 1) == 1,
        }
    })
}

fn tolerance(dtype: DType, c: &Case) -> Tol {
    let taps: usize = c.w[2..].iter().product::<usize>() * c.x[1];
    Tol::of(dtype).scaled((taps as f64).sqrt() + 1.0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn matches_reference(case in cases(), dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &case.x, &mut rng, -1.0, 1.0);
        let w = random(dtype, &case.w, &mut rng, -1.0, 1.0);
        let m = case.w[1] * case.layer.groups as usize;
        let b = random(dtype, &[m], &mut rng, -1.0, 1.0);
        let inputs = if case.bias { vec![&x, &w, &b] } else { vec![&x, &w] };
        let got = run(case.layer.clone(), &inputs)?;
        let want = deconv(&nd(&x), &nd(&w), case.bias.then(|| nd(&b)).as_ref(), &case.layer);
        check(&got, &want, tolerance(dtype, &case))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Bigger images on both backends: one task per (image, group), or a parallel gemm and
    /// col2im when there are few.
    #[test]
    fn larger_images(c in 4usize..10, m in 4usize..10, hw in 10usize..20, dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        for (batch, k, stride, pad, groups) in [(1, 2, 2, 0, 1), (3, 3, 2, 1, 2), (1, 4, 1, 2, 1)] {
            let case = Case {
                x: vec![batch, c * groups, hw, hw + 3],
                w: vec![c * groups, m, k, k],
                layer: Deconvolution {
                    strides: vec![stride; 2],
                    pads_begin: vec![pad; 2],
                    pads_end: vec![pad; 2],
                    dilations: vec![1; 2],
                    output_padding: vec![stride - 1, 0],
                    groups: groups as i64,
                },
                bias: true,
            };
            let x = random(dtype, &case.x, &mut rng, -1.0, 1.0);
            let w = random(dtype, &case.w, &mut rng, -1.0, 1.0);
            let b = random(dtype, &[m * groups], &mut rng, -1.0, 1.0);
            let want = deconv(&nd(&x), &nd(&w), Some(&nd(&b)), &case.layer);
            let tol = tolerance(dtype, &case);
            check(&run(case.layer.clone(), &[&x, &w, &b])?, &want, tol)?;
            let got = run_on(pooled(), case.layer.clone(), &[&x, &w, &b]).map_err(TestCaseError::fail)?;
            check(&got[0], &want, tol)?;
        }
    }
}

fn layer_2d() -> Deconvolution {
    Deconvolution {
        strides: vec![2, 3],
        pads_begin: vec![1, 0],
        pads_end: vec![0, 2],
        dilations: vec![1, 2],
        output_padding: vec![1, 0],
        groups: 2,
    }
}

#[test]
fn shape_rule_is_symbolic_in_batch_and_spatial_dims() {
    let layer = LayerKind::from(layer_2d());
    let inputs = [
        BuildInput::new(DType::F32, &["n", "4", "h", "w"]),
        BuildInput::new(DType::F32, &["4", "3", "3", "2"]),
    ];
    let out = infer(&layer, &inputs).expect("infer");
    assert_eq!(out[0].0, DType::F32);
    let shape = &out[0].1;
    assert_eq!(shape[..2], sym(&["n", "6"])[..]);
    let bind = |s: &str| match s {
        "h" => Some(5),
        "w" => Some(7),
        _ => None,
    };
    assert_eq!(shape[2].eval(&bind), Ok(2 * 4 + 1 + 2 + 1 - 1));
    assert_eq!(shape[3].eval(&bind), Ok(3 * 6 + 2 + 1 - 2));
}

#[test]
fn prepared_for_symbolic_shapes_runs_on_several() {
    let layer = layer_2d();
    let symbolic = [
        BuildInput::new(DType::F32, &["n", "4", "h", "w"]),
        BuildInput::new(DType::F32, &["4", "3", "3", "2"]),
        BuildInput::new(DType::F32, &["6"]),
    ];
    let mut rng = Rng::new(3);
    let w = random(DType::F32, &[4, 3, 3, 2], &mut rng, -1.0, 1.0);
    let b = random(DType::F32, &[6], &mut rng, -1.0, 1.0);
    let xs: Vec<_> = [[1, 4, 2, 3], [3, 4, 5, 1], [2, 4, 1, 1]]
        .iter()
        .map(|s| random(DType::F32, s, &mut rng, -1.0, 1.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x, &w, &b]).collect();
    let kind = LayerKind::from(layer.clone());
    let got = run_prepared(global(), &kind, &symbolic, &runs).expect("run");
    for (x, out) in xs.iter().zip(&got) {
        let want = deconv(&nd(x), &nd(&w), Some(&nd(&b)), &layer);
        check(&out[0], &want, Tol::of(DType::F32).scaled(4.0)).expect("matches");
    }
}

#[test]
fn bad_inputs_are_errors() {
    let mut rng = Rng::new(5);
    let x = random(DType::F32, &[1, 4, 3, 3], &mut rng, -1.0, 1.0);
    let w = random(DType::F32, &[3, 2, 2, 2], &mut rng, -1.0, 1.0);
    let err = run_on(global(), Deconvolution::new(2), &[&x, &w]).expect_err("channels differ");
    assert!(err.contains("channels"), "{err}");
    let w4 = random(DType::F32, &[4, 2, 2, 2], &mut rng, -1.0, 1.0);
    let mut grouped = Deconvolution::new(2);
    grouped.groups = 3;
    let err = run_on(global(), grouped, &[&x, &w4]).expect_err("groups");
    assert!(err.contains("groups"), "{err}");
    let mut padded = Deconvolution::new(2);
    padded.pads_begin = vec![3, 3];
    padded.pads_end = vec![3, 3];
    let err = run_on(global(), padded, &[&x, &w4]).expect_err("empty output");
    assert!(err.contains("output"), "{err}");
    let b = random(DType::F32, &[5], &mut rng, -1.0, 1.0);
    let err = run_on(global(), Deconvolution::new(2), &[&x, &w4, &b]).expect_err("bias");
    assert!(err.contains("bias"), "{err}");
}

#[test]
fn extreme_parameters_are_exact_or_errors() {
    let mut rng = Rng::new(6);
    let x = random(DType::F32, &[1, 1, 2], &mut rng, 1.0, 2.0);
    let w = random(DType::F32, &[1, 1, 1], &mut rng, 1.0, 2.0);
    let mut far = Deconvolution::new(1);
    far.strides = vec![1 << 40];
    far.pads_begin = vec![(1 << 40) - 1];
    let got = run(far.clone(), &[&x, &w]).expect("two outputs");
    check(
        &got,
        &deconv(&nd(&x), &nd(&w), None, &far),
        Tol::of(DType::F32),
    )
    .expect("matches");
    let mut overflow = Deconvolution::new(1);
    overflow.dilations = vec![i64::MAX];
    let w3 = random(DType::F32, &[1, 1, 3], &mut rng, 1.0, 2.0);
    let err = run_on(global(), overflow, &[&x, &w3]).expect_err("overflow");
    assert!(err.contains("overflow"), "{err}");
}

#[test]
fn engine_round_trip_with_dynamic_batch() {
    let layer = layer_2d();
    let inputs = [
        (
            "x",
            DType::F32,
            vec![
                Dim::dynamic("n", 1, 2, 4),
                Dim::Fixed(4),
                Dim::Fixed(3),
                Dim::Fixed(2),
            ],
        ),
        (
            "w",
            DType::F32,
            vec![Dim::Fixed(4), Dim::Fixed(3), Dim::Fixed(3), Dim::Fixed(2)],
        ),
    ];
    let mut rng = Rng::new(8);
    let w = random(DType::F32, &[4, 3, 3, 2], &mut rng, -1.0, 1.0);
    let xs: Vec<_> = [1, 3]
        .iter()
        .map(|&n| random(DType::F32, &[n, 4, 3, 2], &mut rng, -1.0, 1.0))
        .collect();
    let runs: Vec<Vec<_>> = xs.iter().map(|x| vec![x, &w]).collect();
    let got = run_engine(layer.clone().into(), &inputs, &runs).expect("engine");
    for (x, out) in xs.iter().zip(&got) {
        let want = deconv(&nd(x), &nd(&w), None, &layer);
        check(&out[0], &want, Tol::of(DType::F32).scaled(4.0)).expect("matches");
    }
}
