//! Depthwise and channel-multiplier convolutions (the direct kernel): 1-D and 2-D planes
//! through the zero-padded plane path, strides 1 to 3 per dim, dilations, asymmetric padding,
//! odd sizes, small (7×7) and wide planes, a fused activation; 3-D through the line path.
//! Also the convolution's residual input (any path).

use proptest::prelude::*;
use torchtrt_core::layers::{ActivationKind, Convolution};

use crate::reference::convolution::{ConvParams, conv};
use crate::support::{Rng, Tol, check, float_dtype, nd, pooled, random, run, run_on};

/// Input shape, weight shape and parameters of a random depthwise convolution.
fn case(rng: &mut Rng, spatial: usize, max_in: i64) -> (Vec<usize>, Vec<usize>, ConvParams) {
    let mut r = |lo: i64, hi: i64| rng.int(lo, hi) as usize;
    let (channels, multiplier) = (r(1, 12), r(1, 2));
    let mut x = vec![r(1, 2), channels];
    let mut w = vec![channels * multiplier, 1];
    let mut p = ConvParams {
        strides: vec![],
        dilations: vec![],
        pads_begin: vec![],
        pads_end: vec![],
        groups: channels,
    };
    for _ in 0..spatial {
        let (k, d) = (r(1, 5), r(1, 2));
        let (pb, pe) = (r(0, 2), r(0, 3));
        let span = d * (k - 1) + 1;
        let min_in = span.saturating_sub(pb + pe).max(1);
        x.push(r(min_in as i64, max_in.max(min_in as i64)));
        w.push(k);
        p.strides.push(r(1, 3));
        p.dilations.push(d);
        p.pads_begin.push(pb);
        p.pads_end.push(pe);
    }
    (x, w, p)
}

/// The convolution of `p` with a fused `activation`, channels first.
pub(super) fn layer(p: &ConvParams, activation: Option<ActivationKind>) -> Convolution {
    let v = |x: &[usize]| x.iter().map(|&v| v as i64).collect();
    Convolution {
        strides: v(&p.strides),
        pads_begin: v(&p.pads_begin),
        pads_end: v(&p.pads_end),
        dilations: v(&p.dilations),
        groups: p.groups as i64,
        activation,
        channels_last: false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn depthwise_matches_reference(spatial in 1usize..=3, big: bool, relu: bool,
                                   dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let max_in = if big { [0, 200, 40, 9][spatial] } else { [0, 12, 9, 6][spatial] };
        let (xs, ws, p) = case(&mut rng, spatial, max_in);
        let x = random(dtype, &xs, &mut rng, -1.0, 1.0);
        let w = random(dtype, &ws, &mut rng, -1.0, 1.0);
        let b = random(dtype, &[ws[0]], &mut rng, -1.0, 1.0);
        let mut want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &p);
        if relu {
            want.data.iter_mut().for_each(|v| *v = v.max(0.0));
        }
        let activation = relu.then_some(ActivationKind::Relu);
        let taps: usize = ws[2..].iter().product();
        let tol = Tol::of(dtype).scaled((taps as f64).sqrt() * 2.0);
        check(&run(layer(&p, activation), &[&x, &w, &b])?, &want, tol)?;
        let got = run_on(pooled(), layer(&p, activation), &[&x, &w, &b])
            .map_err(TestCaseError::fail)?;
        check(&got[0], &want, tol)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// ShuffleNet's, MobileNet's and EfficientNet's shapes: 3×3, 5×5 and 7×7 (and 9×9, whose
    /// kernel columns are added in two unrolled pieces), padding half the kernel, stride 1 and 2, on 7×7 to 113×113 planes (rows of one to four vectors and
    /// more, with and without a partial last vector) with many channels (parallel tasks),
    /// f32, with and without a fused SiLU. Planes of up to 14×14 outputs take the
    /// channels-in-lanes kernel (blocks of 16 channels on AVX-512, 8 on AVX2), here with a
    /// partial last block of channels (16 to 47).
    #[test]
    fn network_shapes(hw in prop::sample::select(vec![7usize, 14, 28, 56, 57, 112, 113]),
                      kernel in prop::sample::select(vec![3usize, 5, 7, 9]), stride in 1usize..=2,
                      channels in 16usize..48, silu: bool, seed: u64) {
        let mut rng = Rng::new(seed);
        let dtype = torchtrt_core::plugin_api::DType::F32;
        let p = ConvParams {
            strides: vec![stride; 2],
            dilations: vec![1; 2],
            pads_begin: vec![kernel / 2; 2],
            pads_end: vec![kernel / 2; 2],
            groups: channels,
        };
        let x = random(dtype, &[1, channels, hw, hw], &mut rng, -1.0, 1.0);
        let w = random(dtype, &[channels, 1, kernel, kernel], &mut rng, -1.0, 1.0);
        let b = random(dtype, &[channels], &mut rng, -1.0, 1.0);
        let mut want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &p);
        if silu {
            want.data.iter_mut().for_each(|v| *v /= 1.0 + (-*v).exp());
        }
        let activation = silu.then_some(ActivationKind::Silu);
        let tol = Tol::of(dtype).scaled(kernel as f64 * 2.0);
        check(&run(layer(&p, activation), &[&x, &w, &b])?, &want, tol)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A fourth input (the builder's fused residual `Add`) is added before the activation,
    /// on the depthwise and the gemm paths, every float dtype; a residual of another shape
    /// is an error.
    #[test]
    fn residual_input(spatial in 1usize..=2, depthwise: bool, relu: bool,
                      dtype in float_dtype(), seed: u64) {
        let mut rng = Rng::new(seed);
        let (xs, mut ws, mut p) = case(&mut rng, spatial, 9);
        if !depthwise {
            p.groups = 1;
            ws[1] = xs[1];
        }
        let x = random(dtype, &xs, &mut rng, -1.0, 1.0);
        let w = random(dtype, &ws, &mut rng, -1.0, 1.0);
        let b = random(dtype, &[ws[0]], &mut rng, -1.0, 1.0);
        let mut want = conv(&nd(&x), &nd(&w), Some(&nd(&b)), &p);
        let r = random(dtype, &want.shape, &mut rng, -1.0, 1.0);
        for (v, rv) in want.data.iter_mut().zip(r.to_f64_vec()) {
            *v += rv;
            if relu {
                *v = v.max(0.0);
            }
        }
        let activation = relu.then_some(ActivationKind::Relu);
        let taps: usize = ws[1..].iter().product();
        let tol = Tol::of(dtype).scaled((taps as f64).sqrt() * 2.0);
        check(&run(layer(&p, activation), &[&x, &w, &b, &r])?, &want, tol)?;
        let mut other = want.shape.clone();
        other[1] += 1;
        let bad = random(dtype, &other, &mut rng, -1.0, 1.0);
        prop_assert!(run(layer(&p, activation), &[&x, &w, &b, &bad]).is_err());
    }
}
