//! Channels-last convolutions: the native depthwise kernel (kernels 1 to 7, strides 1 to 3,
//! dilations, asymmetric padding, channel counts across vector and work-unit edges, planes
//! with no interior column), the native 1×1 product (channels across panel edges) and the
//! stem kernel of layers of few input channels (stems: any kernel, stride, dilation
//! and padding, positions across the tasks' blocks), with
//! a bias, a residual and each fusable activation, on one and two threads, against the
//! channels-first reference moved channels last; a layer the CPU does not run natively
//! (3×3, one group) still computes through its transposes. The backend's answer to the
//! layout pass says which are native.

use proptest::prelude::*;
use torchtrt_core::layers::{ActivationKind, Convolution};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Backend, ChannelsLast, Tensor};

use super::conv_direct::layer;
use crate::reference::Nd;
use crate::reference::convolution::{ConvParams, conv};
use crate::support::{Rng, Tol, check, global, nd, pooled, random, run_on, with_infer};

/// `t` (`[N, C, H, W]`) moved channels last.
fn to_last(t: &Nd) -> Nd {
    let &[n, c, h, w] = t.shape.as_slice() else {
        panic!("rank 4 expected, got {:?}", t.shape);
    };
    Nd::from_fn(vec![n, h, w, c], |i| t.at(&[i[0], i[3], i[1], i[2]]))
}

fn tensor(t: &Nd) -> Tensor {
    let data: Vec<f32> = t.data.iter().map(|&v| v as f32).collect();
    Tensor::from_vec(&t.shape, data).expect("shape and data agree")
}

/// The activation of index `which` and its reference.
fn activation(which: usize) -> (Option<ActivationKind>, fn(f64) -> f64) {
    match which {
        0 => (None, |v| v),
        1 => (Some(ActivationKind::Relu), |v| v.max(0.0)),
        2 => (Some(ActivationKind::Silu), |v| v / (1.0 + (-v).exp())),
        _ => (
            Some(ActivationKind::Clip {
                min: -0.5,
                max: 0.75,
            }),
            |v| v.clamp(-0.5, 0.75),
        ),
    }
}

/// The channels-last `layer` over `x` (channels first) and `w`, with a bias and residual
/// when asked, on one and two threads against the reference; returns what the CPU backend
/// tells the layout pass about the layer.
#[allow(clippy::too_many_arguments)]
fn matches(
    layer: Convolution,
    p: &ConvParams,
    x: &Tensor,
    w: &Tensor,
    bias: bool,
    residual: bool,
    act: fn(f64) -> f64,
    rng: &mut Rng,
) -> Result<ChannelsLast, TestCaseError> {
    let m = w.shape()[0];
    let b = random(DType::F32, &[m], rng, -1.0, 1.0);
    let mut want = conv(&nd(x), &nd(w), bias.then(|| nd(&b)).as_ref(), p);
    let r = random(DType::F32, &want.shape, rng, -1.0, 1.0);
    if residual {
        for (v, rv) in want.data.iter_mut().zip(nd(&r).data) {
            *v += rv;
        }
    }
    want = to_last(&want.map(act));
    let (x_last, r_last) = (tensor(&to_last(&nd(x))), tensor(&to_last(&nd(&r))));
    let zero = Tensor::from_vec(&[m], vec![0f32; m]).expect("bias");
    let mut inputs = vec![&x_last, w];
    match (bias, residual) {
        (true, _) => inputs.push(&b),
        (false, true) => inputs.push(&zero),
        (false, false) => {}
    }
    if residual {
        inputs.push(&r_last);
    }
    let taps: usize = w.shape()[1..].iter().product();
    let tol = Tol::of(DType::F32).scaled((taps as f64).sqrt() * 2.0);
    let last = Convolution {
        channels_last: true,
        ..layer.clone()
    };
    for backend in [global(), pooled()] {
        let got = run_on(backend, last.clone(), &inputs).map_err(TestCaseError::fail)?;
        check(&got[0], &want, tol)?;
    }
    Ok(with_infer(&[x, w], |infer| {
        global().channels_last(&layer, infer)
    }))
}

/// Square 2-D parameters: `stride`, `pad` on every side, dilation 1, `groups`.
fn square(stride: usize, pad: usize, groups: usize) -> ConvParams {
    ConvParams {
        strides: vec![stride; 2],
        dilations: vec![1; 2],
        pads_begin: vec![pad; 2],
        pads_end: vec![pad; 2],
        groups,
    }
}

/// Parameters of `kernel`-wide windows with `groups`: `stride` down the rows (1 to 3 along
/// them), `dilation`, random asymmetric padding, and an input `h × w` of about `hw` that
/// holds at least one window; returns them with `h` and `w`.
fn random_window(
    rng: &mut Rng,
    kernel: usize,
    stride: usize,
    dilation: usize,
    hw: usize,
    groups: usize,
) -> (ConvParams, usize, usize) {
    let mut r = |lo: usize, hi: usize| rng.int(lo as i64, hi as i64) as usize;
    let pads = [
        r(0, kernel / 2 + 1),
        r(0, kernel / 2 + 1),
        r(0, kernel),
        r(0, kernel),
    ];
    let span = dilation * (kernel - 1) + 1;
    let (h, w) = (
        hw.max(span.saturating_sub(pads[0] + pads[2])),
        (hw + r(0, 9)).max(span.saturating_sub(pads[1] + pads[3])),
    );
    let p = ConvParams {
        strides: vec![stride, r(1, 3)],
        dilations: vec![dilation; 2],
        pads_begin: vec![pads[0], pads[1]],
        pads_end: vec![pads[2], pads[3]],
        groups,
    };
    (p, h, w)
}

/// What the CPU answers for native layers at the level its kernels run: native only with
/// AVX-512 (`TORCHTRT_CPU_SIMD` may cap it below).
fn native(kind: ChannelsLast) -> ChannelsLast {
    if torchtrt_cpu::simd_level() == "v4" {
        kind
    } else {
        ChannelsLast::No
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn depthwise_matches_reference(channels in 2usize..80, hw in 1usize..24, kernel in 1usize..=7,
                                   stride in 1usize..=3, dilation in 1usize..=2,
                                   batch in 1usize..=2, bias: bool, residual: bool,
                                   which in 0usize..4, seed: u64) {
        let mut rng = Rng::new(seed);
        let (p, h, w) = random_window(&mut rng, kernel, stride, dilation, hw, channels);
        let x = random(DType::F32, &[batch, channels, h, w], &mut rng, -1.0, 1.0);
        let wt = random(DType::F32, &[channels, 1, kernel, kernel], &mut rng, -1.0, 1.0);
        let (kind, act) = activation(which);
        let answer = matches(layer(&p, kind), &p, &x, &wt, bias, residual, act, &mut rng)?;
        let want = native(ChannelsLast::Faster);
        prop_assert_eq!(answer, want);
    }

    #[test]
    fn pointwise_matches_reference(channels in 1usize..80, out_channels in 1usize..150,
                                   hw in 1usize..20, batch in 1usize..=3, bias: bool,
                                   residual: bool, which in 0usize..4, seed: u64) {
        let mut rng = Rng::new(seed);
        let p = square(1, 0, 1);
        let x = random(DType::F32, &[batch, channels, hw, hw + 3], &mut rng, -1.0, 1.0);
        let w = random(DType::F32, &[out_channels, channels, 1, 1], &mut rng, -1.0, 1.0);
        let (kind, act) = activation(which);
        let answer = matches(layer(&p, kind), &p, &x, &w, bias, residual, act, &mut rng)?;
        prop_assert_eq!(answer, native(ChannelsLast::Either));
    }

    #[test]
    fn stem_matches_reference(channels in 1usize..=4, out_channels in 1usize..70,
                                  kernel in 1usize..=7, hw in 1usize..24, stride in 1usize..=3,
                                  dilation in 1usize..=2, batch in 1usize..=3, bias: bool,
                                  residual: bool, which in 0usize..4, seed: u64) {
        let mut rng = Rng::new(seed);
        let (p, h, w) = random_window(&mut rng, kernel, stride, dilation, hw, 1);
        let x = random(DType::F32, &[batch, channels, h, w], &mut rng, -1.0, 1.0);
        let wt = random(DType::F32, &[out_channels, channels, kernel, kernel], &mut rng, -1.0, 1.0);
        let (kind, act) = activation(which);
        let answer = matches(layer(&p, kind), &p, &x, &wt, bias, residual, act, &mut rng)?;
        prop_assert_eq!(answer, native(ChannelsLast::Either));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// EfficientNet's and ConvNeXt's depthwise shapes at full width: 3×3 to 7×7, stride 1
    /// and 2, padding half the kernel, 7×7 to 56×56 planes, hundreds of channels.
    #[test]
    fn network_depthwise_shapes(hw in prop::sample::select(vec![7usize, 14, 28, 56]),
                                kernel in prop::sample::select(vec![3usize, 5, 7]),
                                stride in 1usize..=2,
                                channels in prop::sample::select(vec![96usize, 144, 240, 672]),
                                seed: u64) {
        let mut rng = Rng::new(seed);
        let p = square(stride, kernel / 2, channels);
        let x = random(DType::F32, &[1, channels, hw, hw], &mut rng, -1.0, 1.0);
        let w = random(DType::F32, &[channels, 1, kernel, kernel], &mut rng, -1.0, 1.0);
        let (kind, act) = activation(2);
        matches(layer(&p, kind), &p, &x, &w, true, false, act, &mut rng)?;
    }
}

/// A 3×3 layer of one group is not native: it runs channels first between transposes.
#[test]
fn other_layers_run_through_transposes() {
    let mut rng = Rng::new(7);
    let p = square(1, 1, 1);
    let x = random(DType::F32, &[2, 5, 9, 11], &mut rng, -1.0, 1.0);
    let w = random(DType::F32, &[6, 5, 3, 3], &mut rng, -1.0, 1.0);
    let (kind, act) = activation(1);
    let answer = matches(layer(&p, kind), &p, &x, &w, true, true, act, &mut rng).unwrap();
    assert_eq!(answer, ChannelsLast::No);
}

/// Inputs that do not fit the prepared layer are errors, not panics.
#[test]
fn mismatched_inputs_are_errors() {
    if torchtrt_cpu::simd_level() != "v4" {
        return;
    }
    let mut rng = Rng::new(3);
    let w = random(DType::F32, &[8, 1, 3, 3], &mut rng, -1.0, 1.0);
    let p = square(1, 1, 8);
    let last = Convolution {
        channels_last: true,
        ..layer(&p, None)
    };
    let x = random(DType::F32, &[1, 6, 6, 8], &mut rng, -1.0, 1.0);
    let wrong_channels = random(DType::F32, &[1, 6, 6, 7], &mut rng, -1.0, 1.0);
    let short_bias = random(DType::F32, &[7], &mut rng, -1.0, 1.0);
    let bad_residual = random(DType::F32, &[1, 6, 5, 8], &mut rng, -1.0, 1.0);
    let b = random(DType::F32, &[8], &mut rng, -1.0, 1.0);
    assert!(run_on(global(), last.clone(), &[&x, &w, &b]).is_ok());
    assert!(run_on(global(), last.clone(), &[&wrong_channels, &w]).is_err());
    assert!(run_on(global(), last.clone(), &[&x, &w, &short_bias]).is_err());
    assert!(run_on(global(), last.clone(), &[&x, &w, &b, &bad_residual]).is_err());
    let no_taps = Tensor::from_vec(&[8, 1, 0, 3], Vec::<f32>::new()).expect("empty weights");
    assert!(run_on(global(), last, &[&x, &no_taps]).is_err());
}
