//! Convolution: 1-D to 3-D, groups, strides, dilations, padding, bias, every float dtype.

use proptest::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::Convolution;

use crate::reference::Nd;
use crate::reference::convolution::{ConvParams, conv};
use crate::support::{Rng, Tol, check, float_dtype, nd, pooled, random, run, run_on};

/// A convolution problem: input shape, weight shape, parameters.
#[derive(Debug, Clone)]
struct Case {
    x: Vec<usize>,
    w: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<usize>,
    pads_end: Vec<usize>,
    groups: usize,
    bias: bool,
}

fn cases() -> impl Strategy<Value = Case> {
    (1usize..=3, any::<u64>()).prop_map(|(spatial, seed)| {
        let mut rng = Rng::new(seed);
        let mut r = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
        let groups = r(1, 3);
        let (cg, mg, batch) = (r(1, 3), r(1, 3), r(1, 2));
        let max_in = [0, 9, 7, 5][spatial];
        let mut case = Case {
            x: vec![batch, cg * groups],
            w: vec![mg * groups, cg],
            strides: vec![],
            dilations: vec![],
            pads_begin: vec![],
            pads_end: vec![],
            groups,
            bias: r(0, 1) == 1,
        };
        for _ in 0..spatial {
            let (k, d) = (r(1, 3), r(1, 2));
            let (pb, pe) = (r(0, 2), r(0, 2));
            let span = d * (k - 1) + 1;
            let min_in = span.saturating_sub(pb + pe).max(1);
            case.x
                .push(r(min_in as i64, (max_in as i64).max(min_in as i64)));
            case.w.push(k);
            case.strides.push(r(1, 3));
            case.dilations.push(d);
            case.pads_begin.push(pb);
            case.pads_end.push(pe);
        }
        case
    })
}

fn layer(c: &Case) -> Convolution {
    let v = |x: &[usize]| x.iter().map(|&v| v as i64).collect();
    Convolution {
        strides: v(&c.strides),
        pads_begin: v(&c.pads_begin),
        pads_end: v(&c.pads_end),
        dilations: v(&c.dilations),
        groups: c.groups as i64,
        activation: None,
        channels_last: false,
    }
}

fn params(c: &Case) -> ConvParams {
    ConvParams {
        strides: c.strides.clone(),
        dilations: c.dilations.clone(),
        pads_begin: c.pads_begin.clone(),
        pads_end: c.pads_end.clone(),
        groups: c.groups,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_reference(case in cases(), dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let x = random(dtype, &case.x, &mut rng, -1.0, 1.0);
        let w = random(dtype, &case.w, &mut rng, -1.0, 1.0);
        let b = random(dtype, &[case.w[0]], &mut rng, -1.0, 1.0);
        let inputs = if case.bias { vec![&x, &w, &b] } else { vec![&x, &w] };
        let got = run(layer(&case), &inputs)?;
        let taps: usize = case.w[1..].iter().product();
        let want = conv(&nd(&x), &nd(&w), case.bias.then(|| nd(&b)).as_ref(), &params(&case));
        check(&got, &want, Tol::of(dtype).scaled((taps as f64).sqrt()))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// 1×1 (no im2col), strided, grouped and depthwise (direct) convolutions on bigger
    /// images, both backends.
    #[test]
    fn larger_images(c in 4usize..12, m in 4usize..12, hw in 12usize..24, dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let shapes = [(1, 1, 0, 1, c, m), (3, 2, 1, 1, c, m), (3, 1, 1, 2, c, m), (3, 1, 1, c, 1, 1), (5, 2, 2, c, 1, 2)];
        for (k, stride, pad, groups, cg, mg) in shapes {
            let case = Case {
                x: vec![2, cg * groups, hw, hw + 3],
                w: vec![mg * groups, cg, k, k],
                strides: vec![stride; 2],
                dilations: vec![1; 2],
                pads_begin: vec![pad; 2],
                pads_end: vec![pad; 2],
                groups,
                bias: true,
            };
            let x = random(dtype, &case.x, &mut rng, -1.0, 1.0);
            let w = random(dtype, &case.w, &mut rng, -1.0, 1.0);
            let b = random(dtype, &[case.w[0]], &mut rng, -1.0, 1.0);
            let want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &params(&case));
            let tol = Tol::of(dtype).scaled(((cg * k * k) as f64).sqrt());
            check(&run(layer(&case), &[&x, &w, &b])?, &want, tol)?;
            let got = run_on(pooled(), layer(&case), &[&x, &w, &b]).map_err(TestCaseError::fail)?;
            check(&got[0], &want, tol)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    /// Images wide enough to be split into several column tiles (a partial last one, tiles
    /// that start mid-line), and few positions with many channels, split into row tiles.
    #[test]
    fn tiled(c in 12usize..20, m in 33usize..80, seed: u64) {
        let mut rng = Rng::new(seed);
        let shapes = [(3, 1, 1, [41, 37], c, 8), (3, 2, 0, [40, 45], c, 5), (1, 1, 0, [64, 70], c, 3), (3, 1, 1, [5, 6], c, m), (1, 1, 0, [7, 7], c, m)];
        for (k, stride, pad, hw, cg, mg) in shapes {
            let case = Case {
                x: vec![1, cg, hw[0], hw[1]],
                w: vec![mg, cg, k, k],
                strides: vec![stride; 2],
                dilations: vec![1; 2],
                pads_begin: vec![pad; 2],
                pads_end: vec![pad; 2],
                groups: 1,
                bias: true,
            };
            let dtype = torchtrt_core::plugin_api::DType::F32;
            let x = random(dtype, &case.x, &mut rng, -1.0, 1.0);
            let w = random(dtype, &case.w, &mut rng, -1.0, 1.0);
            let b = random(dtype, &[case.w[0]], &mut rng, -1.0, 1.0);
            let want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &params(&case));
            let tol = Tol::of(dtype).scaled(((cg * k * k) as f64).sqrt());
            check(&run(layer(&case), &[&x, &w, &b])?, &want, tol)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A fused activation matches the convolution followed by the activation, on the
    /// gemm path and the depthwise (direct) path.
    #[test]
    fn fused_activation(case in cases(), dtype in float_dtype(), which in 0usize..4, depthwise: bool, seed: u64) {
        use torchtrt_core::layers::ActivationKind;
        let mut rng = Rng::new(seed);
        let mut case = case;
        if depthwise {
            case.groups = case.x[1];
            case.w[0] = case.x[1];
            case.w[1] = 1;
        }
        let x = random(dtype, &case.x, &mut rng, -1.0, 1.0);
        let w = random(dtype, &case.w, &mut rng, -1.0, 1.0);
        let b = random(dtype, &[case.w[0]], &mut rng, -1.0, 1.0);
        let (kind, f): (ActivationKind, fn(f64) -> f64) = match which {
            0 => (ActivationKind::Relu, |v| v.max(0.0)),
            1 => (ActivationKind::LeakyRelu { alpha: 0.125 }, |v| if v < 0.0 { v * 0.125 } else { v }),
            2 => (ActivationKind::Clip { min: -0.5, max: 0.75 }, |v| v.clamp(-0.5, 0.75)),
            _ => (ActivationKind::Silu, |v| v / (1.0 + (-v).exp())),
        };
        let mut fused = layer(&case);
        fused.activation = Some(kind);
        let got = run(fused, &[&x, &w, &b])?;
        let mut want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &params(&case));
        want.data.iter_mut().for_each(|v| *v = f(*v));
        let taps: usize = case.w[1..].iter().product();
        check(&got, &want, Tol::of(dtype).scaled((taps as f64).sqrt()))?;
    }
}

/// A 3×3 stride-1 layer with bias on inputs `x`, `m` output channels, `dilations` and
/// `pads` (begin h, w, end h, w).
fn case_3x3(x: Vec<usize>, m: usize, dilations: Vec<usize>, pads: [usize; 4]) -> Case {
    Case {
        w: vec![m, x[1], 3, 3],
        x,
        strides: vec![1; 2],
        dilations,
        pads_begin: pads[..2].to_vec(),
        pads_end: pads[2..].to_vec(),
        groups: 1,
        bias: true,
    }
}

/// Random f32 input, weights and bias for `case`, and the reference output.
fn random_3x3(case: &Case, rng: &mut Rng) -> (Tensor, Tensor, Tensor, Nd) {
    let dtype = torchtrt_core::plugin_api::DType::F32;
    let x = random(dtype, &case.x, rng, -1.0, 1.0);
    let w = random(dtype, &case.w, rng, -1.0, 1.0);
    let b = random(dtype, &[case.w[0]], rng, -1.0, 1.0);
    let want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &params(case));
    (x, w, b, want)
}

/// A 3×3 stride-1 f32 layer of `batch` images, `c` → `m` channels on an `h`×`w` input
/// padded by `pads` (begin h, w, end h, w), optionally with a fused Relu, on one and several
/// threads against the reference; the tolerance grows with √(9c) times `spread`.
#[allow(clippy::too_many_arguments)]
fn check_3x3(
    batch: usize,
    c: usize,
    m: usize,
    h: usize,
    w: usize,
    pads: [usize; 4],
    relu: bool,
    seed: u64,
    spread: f64,
) -> Result<(), TestCaseError> {
    use torchtrt_core::layers::ActivationKind;
    let mut rng = Rng::new(seed);
    let case = case_3x3(vec![batch, c, h, w], m, vec![1; 2], pads);
    let dtype = torchtrt_core::plugin_api::DType::F32;
    let (x, wt, b, mut want) = random_3x3(&case, &mut rng);
    let mut fused = layer(&case);
    if relu {
        fused.activation = Some(ActivationKind::Relu);
        want.data.iter_mut().for_each(|v| *v = v.max(0.0));
    }
    let tol = Tol::of(dtype).scaled(((c * 9) as f64).sqrt() * spread);
    check(&run(fused.clone(), &[&x, &wt, &b])?, &want, tol)?;
    let got = run_on(pooled(), fused, &[&x, &wt, &b]).map_err(TestCaseError::fail)?;
    check(&got[0], &want, tol)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// 3×3 stride-1 f32 layers with enough channels and outputs for the Winograd path:
    /// odd and even output sizes (partial last tiles), asymmetric padding, a fused
    /// activation, one and several threads.
    #[test]
    fn winograd(c in 64usize..72, m in 16usize..40, h in 7usize..30, w in 7usize..30,
                pads in proptest::array::uniform4(0usize..3), relu: bool, seed: u64) {
        check_3x3(2, c, m, h, w, pads, relu, seed, 4.0)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Images of 7×7 and 8×8 outputs, whose Winograd products run on weights packed once:
    /// output channels that fill no whole panel of 8, batches of one to three, a fused
    /// activation, one and several threads.
    #[test]
    fn winograd_small_images(c in 64usize..72, m in 16usize..90, h in 7usize..9, w in 7usize..9,
                             batch in 1usize..4, relu: bool, seed: u64) {
        check_3x3(batch, c, m, h, w, [1; 4], relu, seed, 4.0)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// Images of at least 56×56 outputs with 128 channels take Winograd F(4×4, 3×3): partial
    /// last tiles, asymmetric padding, a fused activation, one and several threads.
    #[test]
    fn winograd_large(c in 128usize..136, m in 16usize..20, h in 58usize..64, w in 58usize..64,
                      pads in proptest::array::uniform4(0usize..3), relu: bool, seed: u64) {
        check_3x3(1, c, m, h, w, pads, relu, seed, 8.0)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    /// Dilated 3×3 stride-1 layers whose padding and images are multiples of the dilation
    /// run as undilated layers on the images' phases (through Winograd): dilations 2 and 3
    /// per dim, phases of 16 to 18 across, padding of 0 to 2 dilations, with a residual and
    /// a fused activation, on one and several threads.
    #[test]
    fn dilated_layers_on_phases(c in 64usize..70, m in 16usize..24, d in proptest::array::uniform2(2usize..4),
                                sides in proptest::array::uniform2(16usize..19),
                                pads in proptest::array::uniform4(0usize..3), seed: u64) {
        use torchtrt_core::layers::ActivationKind;
        let mut rng = Rng::new(seed);
        let pads = [pads[0] * d[0], pads[1] * d[1], pads[2] * d[0], pads[3] * d[1]];
        let case = case_3x3(vec![1, c, sides[0] * d[0], sides[1] * d[1]], m, d.to_vec(), pads);
        let dtype = torchtrt_core::plugin_api::DType::F32;
        let (x, wt, b, mut want) = random_3x3(&case, &mut rng);
        let r = random(dtype, &want.shape, &mut rng, -1.0, 1.0);
        for (v, r) in want.data.iter_mut().zip(r.to_f64_vec()) {
            *v = (*v + r).max(0.0);
        }
        let mut fused = layer(&case);
        fused.activation = Some(ActivationKind::Relu);
        let tol = Tol::of(dtype).scaled(((c * 9) as f64).sqrt() * 4.0);
        check(&run(fused.clone(), &[&x, &wt, &b, &r])?, &want, tol)?;
        let got = run_on(pooled(), fused, &[&x, &wt, &b, &r]).map_err(TestCaseError::fail)?;
        check(&got[0], &want, tol)?;
    }
}
