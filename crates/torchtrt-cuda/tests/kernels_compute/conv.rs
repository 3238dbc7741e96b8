//! Convolution: GEMM (1×1 direct and im2col), depthwise and grouped, 1-D, bias and fused
//! activations.

use torchtrt_core::layers::{ActivationKind, Convolution};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{LayerKind, Tensor};
use torchtrt_cuda::kernels::ConvTactic;

use crate::common::device_or_skip;
use crate::harness::{check, check_against_f32, forcing, gpu, rand, supported};

struct Case {
    x: &'static [usize],
    w: &'static [usize],
    groups: i64,
    strides: &'static [i64],
    pads: (&'static [i64], &'static [i64]),
    dilations: &'static [i64],
    bias: bool,
    activation: Option<ActivationKind>,
}

fn layer(c: &Case) -> LayerKind {
    LayerKind::Convolution(Convolution {
        strides: c.strides.to_vec(),
        pads_begin: c.pads.0.to_vec(),
        pads_end: c.pads.1.to_vec(),
        dilations: c.dilations.to_vec(),
        groups: c.groups,
        activation: c.activation,
        channels_last: false,
    })
}

/// The activations the tensor-core kernel fuses, and none.
const EPILOGUES: [Option<ActivationKind>; 5] = [
    None,
    Some(ActivationKind::Silu),
    Some(ActivationKind::Relu),
    Some(ActivationKind::Clip {
        min: -0.5,
        max: 2.0,
    }),
    Some(ActivationKind::LeakyRelu { alpha: 0.1 }),
];

const CASES: &[Case] = &[
    Case {
        x: &[2, 8, 13, 11],
        w: &[16, 8, 3, 3],
        groups: 1,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[3, 16, 7, 9],
        w: &[8, 16, 1, 1],
        groups: 1,
        strides: &[1, 1],
        pads: (&[0, 0], &[0, 0]),
        dilations: &[1, 1],
        bias: false,
        activation: None,
    },
    Case {
        x: &[2, 16, 7, 9],
        w: &[8, 16, 1, 1],
        groups: 1,
        strides: &[2, 2],
        pads: (&[0, 0], &[0, 0]),
        dilations: &[1, 1],
        bias: true,
        activation: None,
    },
    Case {
        x: &[1, 3, 23, 19],
        w: &[8, 3, 7, 7],
        groups: 1,
        strides: &[2, 2],
        pads: (&[3, 3], &[3, 3]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[2, 12, 15, 15],
        w: &[12, 1, 3, 3],
        groups: 12,
        strides: &[2, 2],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Clip { min: 0.0, max: 6.0 }),
    },
    Case {
        x: &[1, 12, 10, 9],
        w: &[24, 1, 5, 5],
        groups: 12,
        strides: &[1, 1],
        pads: (&[2, 2], &[2, 2]),
        dilations: &[1, 1],
        bias: false,
        activation: Some(ActivationKind::Clip {
            min: -1.0,
            max: 1.5,
        }),
    },
    Case {
        x: &[1, 8, 9, 9],
        w: &[12, 4, 3, 3],
        groups: 2,
        strides: &[1, 2],
        pads: (&[1, 0], &[2, 1]),
        dilations: &[2, 1],
        bias: true,
        activation: Some(ActivationKind::LeakyRelu { alpha: 0.1 }),
    },
    Case {
        x: &[2, 6, 20],
        w: &[5, 6, 3],
        groups: 1,
        strides: &[2],
        pads: (&[1], &[1]),
        dilations: &[1],
        bias: true,
        activation: Some(ActivationKind::LeakyRelu { alpha: 0.2 }),
    },
    Case {
        x: &[1, 3, 32, 32],
        w: &[16, 3, 8, 8],
        groups: 1,
        strides: &[8, 8],
        pads: (&[0, 0], &[0, 0]),
        dilations: &[1, 1],
        bias: true,
        activation: None,
    },
    Case {
        x: &[2, 8, 11, 12],
        w: &[8, 1, 7, 7],
        groups: 8,
        strides: &[1, 1],
        pads: (&[6, 6], &[6, 6]),
        dilations: &[2, 2],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[1, 6, 9, 10],
        w: &[6, 1, 3, 1],
        groups: 6,
        strides: &[2, 1],
        pads: (&[1, 0], &[1, 0]),
        dilations: &[1, 1],
        bias: true,
        activation: None,
    },
    Case {
        x: &[1, 4, 8, 8],
        w: &[6, 4, 3, 3],
        groups: 1,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[1, 4, 64, 64],
        w: &[8, 4, 3, 3],
        groups: 1,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[1, 4, 64, 64],
        w: &[4, 1, 3, 3],
        groups: 4,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[3, 32, 30, 30],
        w: &[48, 32, 3, 3],
        groups: 1,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: None,
    },
    Case {
        x: &[1, 2, 4, 5000],
        w: &[3, 2, 3, 3],
        groups: 1,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: None,
    },
    Case {
        x: &[5, 417, 7, 7],
        w: &[8, 417, 3, 3],
        groups: 1,
        strides: &[1, 1],
        pads: (&[1, 1], &[1, 1]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
    Case {
        x: &[2, 16, 17, 19],
        w: &[24, 16, 1, 1],
        groups: 1,
        strides: &[1, 1],
        pads: (&[0, 0], &[0, 0]),
        dilations: &[1, 1],
        bias: true,
        activation: Some(ActivationKind::Relu),
    },
];

#[test]
fn convolution_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for (i, c) in CASES.iter().enumerate() {
            let seed = 100 * i as u64;
            let mut inputs = vec![
                (rand(dtype, c.x, seed), false),
                (rand(dtype, c.w, seed + 1), true),
            ];
            if c.bias {
                inputs.push((rand(dtype, &[c.w[0]], seed + 2), true));
            }
            check(
                &dev,
                &format!("Convolution case {i} x{:?} w{:?}", c.x, c.w),
                &layer(c),
                &inputs,
            );
        }
    }
}

#[test]
fn convolution_weights_as_runtime_inputs() {
    let Some(dev) = device_or_skip() else { return };
    let c = &CASES[0];
    let inputs = vec![
        (rand(DType::F32, c.x, 7), false),
        (rand(DType::F32, c.w, 8), false),
        (rand(DType::F32, &[c.w[0]], 9), false),
    ];
    check(&dev, "Convolution with runtime weights", &layer(c), &inputs);
}

#[test]
fn convolution_declines_3d_and_rejects_bad_outputs() {
    let Some(dev) = device_or_skip() else { return };
    let l = LayerKind::Convolution(Convolution::new(3));
    let inputs = [
        (rand(DType::F32, &[1, 2, 4, 4, 4], 1), false),
        (rand(DType::F32, &[3, 2, 2, 2, 2], 2), true),
    ];
    assert!(!supported(&dev, &l, &inputs));
    let c = &CASES[1];
    let inputs = [
        (rand(DType::F32, c.x, 1), false),
        (rand(DType::F32, c.w, 2), true),
    ];
    let wrong = [rand(DType::F32, &[3, 8, 7, 8], 3)];
    let err = gpu(&dev, &layer(c), &inputs, &wrong).unwrap_err();
    assert!(err.contains("do not fit"), "{err}");
}

#[test]
fn convolution_adds_a_residual_before_the_activation() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        for i in [0, 1, 2, 4, 7, 12, 14, 15, 16, 17] {
            let c = &CASES[i];
            let seed = 1000 + 10 * i as u64;
            let out = crate::harness::cpu(
                &layer(c),
                &[
                    (rand(dtype, c.x, seed), false),
                    (rand(dtype, c.w, seed + 1), true),
                ],
            );
            let inputs = vec![
                (rand(dtype, c.x, seed), false),
                (rand(dtype, c.w, seed + 1), true),
                (rand(dtype, &[c.w[0]], seed + 2), true),
                (rand(dtype, out[0].shape(), seed + 3), false),
            ];
            check(
                &dev,
                &format!("Convolution case {i} with a residual, {dtype}"),
                &layer(c),
                &inputs,
            );
        }
    }
}

/// The padding of depthwise case `case` with a `k`×`k` window, in turn: centred, none, and
/// uneven (a half window before the rows, one more than half after the columns).
fn window_pads(k: usize, case: u64) -> (Vec<i64>, Vec<i64>) {
    let half = (k / 2) as i64;
    match case % 3 {
        0 => (vec![half, half], vec![half, half]),
        1 => (vec![0, 0], vec![0, 0]),
        _ => (vec![half, 0], vec![0, half + 1]),
    }
}

/// A depthwise convolution of `groups` groups at stride `s` with `pads` (begin, end).
fn depthwise_layer(
    s: usize,
    (begin, end): (&[i64], &[i64]),
    groups: usize,
    activation: Option<ActivationKind>,
    channels_last: bool,
) -> LayerKind {
    LayerKind::Convolution(Convolution {
        strides: vec![s as i64; 2],
        pads_begin: begin.to_vec(),
        pads_end: end.to_vec(),
        dilations: vec![1, 1],
        groups: groups as i64,
        activation,
        channels_last,
    })
}

/// The tiled depthwise kernel (3×3, 5×5, 7×7 at stride 1 and 2): planes small enough to share
/// a block, planes wider than one tile and taller than one, several tiles of many planes,
/// no padding and uneven padding, a channel multiplier, every activation, rows read one
/// element or four at a time; then every case again with a residual.
#[test]
fn depthwise_tiles_match_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let activations = [
        None,
        Some(ActivationKind::Relu),
        Some(ActivationKind::LeakyRelu { alpha: 0.1 }),
        Some(ActivationKind::Clip {
            min: -0.5,
            max: 1.0,
        }),
        Some(ActivationKind::Silu),
    ];
    let planes: &[([usize; 4], usize)] = &[
        ([2, 6, 7, 7], 1),
        ([1, 3, 9, 300], 1),
        ([1, 2, 150, 11], 2),
        ([3, 40, 14, 14], 1),
        ([2, 5, 33, 57], 1),
        ([1, 4, 21, 19], 3),
        ([2, 8, 56, 56], 1),
        ([1, 5, 28, 30], 1),
    ];
    let mut case = 0u64;
    for k in [3usize, 5, 7] {
        for s in [1usize, 2] {
            for &(x, mult) in planes {
                let x = [x[0], x[1], x[2].max(k), x[3].max(k)];
                let (begin, end) = window_pads(k, case);
                let act = activations[case as usize % activations.len()];
                let l = depthwise_layer(s, (&begin, &end), x[1], act, false);
                let w = [x[1] * mult, 1, k, k];
                let dtype = [DType::F32, DType::F16, DType::BF16][case as usize / 2 % 3];
                let mut inputs = vec![
                    (rand(dtype, &x, 7 * case), false),
                    (rand(dtype, &w, 7 * case + 1), true),
                    (rand(dtype, &[w[0]], 7 * case + 2), true),
                ];
                let what =
                    format!("depthwise k{k} s{s} x{x:?} w{w:?} {dtype} pads {begin:?} {end:?}");
                check(&dev, &what, &l, &inputs);
                let out = crate::harness::cpu(&l, &inputs);
                inputs.push((rand(dtype, out[0].shape(), 7 * case + 3), false));
                check(&dev, &format!("{what} with a residual"), &l, &inputs);
                case += 1;
            }
        }
    }
}

/// The channels-last depthwise kernel (`Convolution::channels_last` on a depthwise layer,
/// what the layout pass makes of ConvNeXt's 7×7 convolutions): 3×3, 5×5 and 7×7 at stride 1
/// and 2; channel counts read 8 or 4 at a time and ones that are not (6, 3); rows that leave
/// a partial group of output columns; centred, no and uneven padding; every activation;
/// constant weights (stored tap-major) and weights given at run time; then every case again
/// with a residual, channels last too.
#[test]
fn depthwise_channels_last_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let images: [[usize; 4]; 5] = [
        [2, 7, 7, 96],
        [1, 9, 13, 8],
        [3, 6, 11, 6],
        [1, 12, 5, 3],
        [2, 17, 30, 24],
    ];
    let mut case = 0u64;
    for k in [3usize, 5, 7] {
        for s in [1usize, 2] {
            for x in images {
                let x = [x[0], x[1].max(k), x[2].max(k), x[3]];
                let (begin, end) = window_pads(k, case);
                let act = EPILOGUES[case as usize % EPILOGUES.len()];
                let l = depthwise_layer(s, (&begin, &end), x[3], act, true);
                let w = [x[3], 1, k, k];
                let dtype = [DType::F32, DType::F16, DType::BF16][case as usize % 3];
                let constant = case % 4 != 3;
                let mut inputs = vec![
                    (rand(dtype, &x, 11 * case), false),
                    (rand(dtype, &w, 11 * case + 1), constant),
                    (rand(dtype, &[w[0]], 11 * case + 2), true),
                ];
                let what = format!(
                    "channels-last depthwise k{k} s{s} x{x:?} {dtype} pads {begin:?} {end:?} \
                     constant weights {constant}"
                );
                check(&dev, &what, &l, &inputs);
                let out = crate::harness::cpu(&l, &inputs);
                inputs.push((rand(dtype, out[0].shape(), 11 * case + 3), false));
                check(&dev, &format!("{what} with a residual"), &l, &inputs);
                case += 1;
            }
        }
    }
}

/// Shapes the tensor-core implicit GEMM takes (f16/bf16, one group, channels a multiple of
/// 32), the tactic forced: output channels and columns that leave partial tiles, odd and
/// even output planes (single and paired stores), 1×1 at strides 1 and 2, 3×3 with padding,
/// stride and dilation, uneven padding, a 7×7 window of 49 taps, 1-D, and problems large
/// enough for each tile; each with and without bias, then with a residual, through every
/// activation, every case and activation with another tile forced (`ConvTactic::Tile`).
#[test]
fn implicit_gemm_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let conv = |x, w, strides, pads, dilations| Case {
        x,
        w,
        groups: 1,
        strides,
        pads,
        dilations,
        bias: true,
        activation: None,
    };
    let cases = [
        conv(
            &[2, 32, 13, 11],
            &[40, 32, 3, 3],
            &[1, 1],
            (&[1, 1], &[1, 1]),
            &[1, 1],
        ),
        conv(
            &[3, 64, 7, 7],
            &[136, 64, 1, 1],
            &[1, 1],
            (&[0, 0], &[0, 0]),
            &[1, 1],
        ),
        conv(
            &[2, 32, 16, 16],
            &[64, 32, 3, 3],
            &[2, 2],
            (&[1, 1], &[1, 1]),
            &[1, 1],
        ),
        conv(
            &[1, 96, 9, 10],
            &[32, 96, 3, 3],
            &[1, 1],
            (&[2, 1], &[2, 3]),
            &[2, 2],
        ),
        conv(
            &[2, 32, 15, 15],
            &[48, 32, 1, 1],
            &[2, 2],
            (&[0, 0], &[0, 0]),
            &[1, 1],
        ),
        conv(
            &[1, 32, 8, 8],
            &[300, 32, 7, 7],
            &[1, 1],
            (&[3, 3], &[3, 3]),
            &[1, 1],
        ),
        conv(
            &[4, 64, 28, 28],
            &[128, 64, 3, 3],
            &[1, 1],
            (&[1, 1], &[1, 1]),
            &[1, 1],
        ),
        conv(&[2, 32, 20], &[16, 32, 5], &[1], (&[2], &[2]), &[1]),
        conv(
            &[4, 32, 96, 96],
            &[128, 32, 3, 3],
            &[1, 1],
            (&[1, 1], &[1, 1]),
            &[1, 1],
        ),
        conv(
            &[4, 64, 96, 96],
            &[64, 64, 1, 1],
            &[1, 1],
            (&[0, 0], &[0, 0]),
            &[1, 1],
        ),
    ];
    let activations = EPILOGUES;
    for dtype in [DType::F16, DType::BF16] {
        for (i, c) in cases.iter().enumerate() {
            let seed = 5000 + 10 * i as u64;
            let out = crate::harness::cpu(
                &layer(c),
                &[
                    (rand(dtype, c.x, seed), false),
                    (rand(dtype, c.w, seed + 1), true),
                ],
            );
            for (j, act) in activations.iter().enumerate() {
                let l = layer(&Case {
                    activation: *act,
                    ..conv(c.x, c.w, c.strides, c.pads, c.dilations)
                });
                let mut inputs = vec![
                    (rand(dtype, c.x, seed), false),
                    (rand(dtype, c.w, seed + 1), true),
                ];
                if j % 2 == 0 {
                    inputs.push((rand(dtype, &[c.w[0]], seed + 2), true));
                }
                let what = format!(
                    "implicit GEMM case {i} x{:?} w{:?} {act:?} {dtype}",
                    c.x, c.w
                );
                let tile = ConvTactic::Tile(i + j);
                forcing(tile, || check_against_f32(&dev, &what, &l, &inputs));
                if j % 2 == 1 {
                    inputs.push((rand(dtype, &[c.w[0]], seed + 2), true));
                }
                inputs.push((rand(dtype, out[0].shape(), seed + 3), false));
                forcing(tile, || {
                    check_against_f32(&dev, &format!("{what} with a residual"), &l, &inputs)
                });
            }
        }
    }
}

/// The implicit GEMM reading and writing channels last (`Convolution::channels_last`, what
/// the builder's layout pass makes) against the CPU computing in f32: odd and even output
/// planes, an odd output channel count (single stores), 1×1 at stride 1, 3×3 with stride,
/// uneven padding and dilation, problems large enough for each tile; with and without bias,
/// with a residual (channels last too), through every activation.
#[test]
fn implicit_gemm_channels_last_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    type Window = ([i64; 2], [i64; 2], [i64; 2], [i64; 2]);
    let plain: Window = ([1, 1], [1, 1], [1, 1], [1, 1]);
    let cases: [([usize; 4], [usize; 4], Window); 7] = [
        ([2, 13, 11, 32], [40, 32, 3, 3], plain),
        (
            [3, 7, 7, 64],
            [136, 64, 1, 1],
            ([1, 1], [0, 0], [0, 0], [1, 1]),
        ),
        (
            [2, 16, 16, 32],
            [64, 32, 3, 3],
            ([2, 2], [1, 1], [1, 1], [1, 1]),
        ),
        (
            [1, 9, 10, 96],
            [37, 96, 3, 3],
            ([1, 1], [2, 1], [2, 3], [2, 2]),
        ),
        (
            [2, 15, 15, 32],
            [48, 32, 1, 1],
            ([2, 2], [0, 0], [0, 0], [1, 1]),
        ),
        ([4, 28, 28, 64], [128, 64, 3, 3], plain),
        ([4, 96, 96, 32], [128, 32, 3, 3], plain),
    ];
    let activations = EPILOGUES;
    for dtype in [DType::F16, DType::BF16] {
        for (i, (x, w, (strides, pads_begin, pads_end, dilations))) in cases.iter().enumerate() {
            let act = activations[i % activations.len()];
            let l = LayerKind::Convolution(Convolution {
                strides: strides.to_vec(),
                pads_begin: pads_begin.to_vec(),
                pads_end: pads_end.to_vec(),
                dilations: dilations.to_vec(),
                groups: 1,
                activation: act,
                channels_last: true,
            });
            let seed = 7000 + 10 * i as u64;
            let mut inputs = vec![
                (rand(dtype, x, seed), false),
                (rand(dtype, w, seed + 1), true),
            ];
            let what =
                format!("channels-last implicit GEMM case {i} x{x:?} w{w:?} {act:?} {dtype}");
            let check = |what: &str, inputs: &[(Tensor, bool)]| {
                let tiles = (0..4).map(ConvTactic::Tile);
                for tactic in tiles.chain([ConvTactic::Implicit, ConvTactic::Gemm]) {
                    let what = format!("{what} ({tactic:?})");
                    forcing(tactic, || check_against_f32(&dev, &what, &l, inputs));
                }
            };
            if i % 2 == 0 {
                check(&what, &inputs);
            }
            inputs.push((rand(dtype, &[w[0]], seed + 2), true));
            check(&format!("{what} with bias"), &inputs);
            let out = crate::harness::cpu(&l, &inputs);
            inputs.push((rand(dtype, out[0].shape(), seed + 3), false));
            check(&format!("{what} with a residual"), &inputs);
        }
    }
}

/// Pointwise channels-last convolutions as one cuBLASLt product (the GEMM tactic) with the
/// bias, the residual and ReLU in its epilogue, every combination of the three, against the
/// CPU computing in f32; an odd output channel count among them.
#[test]
fn pointwise_channels_last_products_fuse_bias_residual_and_relu() {
    let Some(dev) = device_or_skip() else { return };
    for dtype in [DType::F16, DType::BF16] {
        for (i, (x, w)) in [
            ([2, 9, 7, 64], [72, 64, 1, 1]),
            ([3, 5, 5, 32], [37, 32, 1, 1]),
        ]
        .into_iter()
        .enumerate()
        {
            for act in [None, Some(ActivationKind::Relu)] {
                let l = LayerKind::Convolution(Convolution {
                    activation: act,
                    channels_last: true,
                    ..Convolution::new(2)
                });
                let seed = 7500 + 10 * i as u64;
                let x = (rand(dtype, &x, seed), false);
                let w = (rand(dtype, &w, seed + 1), true);
                let bias = (rand(dtype, &w.0.shape()[..1], seed + 2), true);
                let out = crate::harness::cpu(&l, &[x.clone(), w.clone(), bias.clone()]);
                let res = (rand(dtype, out[0].shape(), seed + 3), false);
                let combos = [
                    ("", vec![x.clone(), w.clone()]),
                    (" with bias", vec![x.clone(), w.clone(), bias.clone()]),
                    (
                        " with bias and a residual",
                        vec![x.clone(), w.clone(), bias.clone(), res.clone()],
                    ),
                ];
                for (with, inputs) in combos {
                    let what = format!(
                        "pointwise x{:?} w{:?} {act:?} {dtype}{with}",
                        x.0.shape(),
                        w.0.shape()
                    );
                    forcing(ConvTactic::Gemm, || {
                        check_against_f32(&dev, &what, &l, &inputs)
                    });
                }
            }
        }
    }
}
