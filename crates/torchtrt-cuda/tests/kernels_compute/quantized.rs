//! INT8: the 8-bit convolution on integer tensor cores, `Quantize` and `Dequantize`, against
//! the CPU backend's kernels.

use torchtrt_core::layers::{
    ActivationKind, Convolution, Dequantize, OutputQuantization, Quantize, QuantizedConvolution,
};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{LayerKind, Tensor};

use crate::common::{device_or_skip, random_f32};
use crate::harness::{bound_at, cpu, gpu, rand, supported, widened};

/// Random bytes of `dtype` (`I8`, `U8` or `I32`) spread over its range.
fn bytes(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let v = random_f32(shape.iter().product(), seed);
    match dtype {
        DType::I8 => Tensor::from_vec(shape, v.iter().map(|x| (x * 63.9) as i8).collect()),
        DType::U8 => Tensor::from_vec(shape, v.iter().map(|x| ((x + 2.0) * 63.9) as u8).collect()),
        DType::I32 => Tensor::from_vec(shape, v.iter().map(|x| (x * 40_000.0) as i32).collect()),
        other => panic!("no random integers of {other}"),
    }
    .expect("random integers")
}

fn scalar(v: f32) -> (Tensor, bool) {
    (Tensor::scalar(v), true)
}

/// A 2-D convolution with `stride`, symmetric `pad` and `dilation`.
fn window(stride: i64, pad: i64, dilation: i64, activation: Option<ActivationKind>) -> Convolution {
    Convolution {
        strides: vec![stride; 2],
        pads_begin: vec![pad; 2],
        pads_end: vec![pad; 2],
        dilations: vec![dilation; 2],
        groups: 1,
        activation,
        channels_last: false,
    }
}

struct Case {
    x: [usize; 4],
    w: [usize; 4],
    stride: i64,
    pad: i64,
    dilation: i64,
}

/// Shapes from ResNet-50 (1×1 at strides 1 and 2, 3×3 with padding), output channels that
/// leave partial tiles, a dilated window, an odd plane, and a problem large enough for the
/// largest tile.
const CASES: &[Case] = &[
    Case {
        x: [2, 64, 14, 13],
        w: [64, 64, 3, 3],
        stride: 1,
        pad: 1,
        dilation: 1,
    },
    Case {
        x: [3, 128, 7, 7],
        w: [200, 128, 1, 1],
        stride: 1,
        pad: 0,
        dilation: 1,
    },
    Case {
        x: [2, 64, 15, 15],
        w: [96, 64, 1, 1],
        stride: 2,
        pad: 0,
        dilation: 1,
    },
    Case {
        x: [1, 192, 9, 11],
        w: [40, 192, 3, 3],
        stride: 2,
        pad: 1,
        dilation: 1,
    },
    Case {
        x: [2, 64, 12, 12],
        w: [72, 64, 3, 3],
        stride: 1,
        pad: 2,
        dilation: 2,
    },
    Case {
        x: [8, 64, 56, 56],
        w: [256, 64, 1, 1],
        stride: 1,
        pad: 0,
        dilation: 1,
    },
];

fn layer(c: &Case, dtype: DType, x: DType, act: Option<ActivationKind>) -> QuantizedConvolution {
    let scales = random_f32(c.w[0], 77 + c.w[0] as u64);
    QuantizedConvolution {
        conv: window(c.stride, c.pad, c.dilation, act),
        input_scale: if x == DType::U8 { 0.02 } else { 0.03 },
        input_zero_point: 0,
        weight_scales: scales.iter().map(|s| 0.004 + 0.002 * s.abs()).collect(),
        dtype,
        output: None,
    }
}

/// The float 8-bit convolution (f32 and f16 bias, residual and output; I8 and U8 input) with
/// and without bias, residual and ReLU, against the CPU's f32 kernel: the sums are exact, so
/// the outputs differ only by the float type's rounding.
#[test]
fn quantized_convolution_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for (i, c) in CASES.iter().enumerate() {
        let seed = 9000 + 10 * i as u64;
        for (j, (x_type, dtype)) in [
            (DType::I8, DType::F32),
            (DType::U8, DType::F16),
            (DType::I8, DType::F16),
            (DType::U8, DType::F32),
        ]
        .into_iter()
        .enumerate()
        {
            let act = (j % 2 == 1).then_some(ActivationKind::Relu);
            let l = layer(c, dtype, x_type, act);
            let mut inputs = vec![
                (bytes(x_type, &c.x, seed), false),
                (bytes(DType::I8, &c.w, seed + 1), true),
            ];
            if j != 2 {
                inputs.push((rand(dtype, &[c.w[0]], seed + 2), true));
            }
            let f32_layer = LayerKind::QuantizedConvolution(QuantizedConvolution {
                dtype: DType::F32,
                ..l.clone()
            });
            let shape = &cpu(&f32_layer, &wide(&inputs))[0];
            if j >= 2 {
                let out: Vec<usize> = shape.shape().to_vec();
                if inputs.len() == 2 {
                    inputs.push((rand(dtype, &[c.w[0]], seed + 2), true));
                }
                inputs.push((rand(dtype, &out, seed + 3), false));
            }
            let what = format!(
                "case {i} x{:?} w{:?} {x_type} → {dtype} {act:?} {} inputs",
                c.x,
                c.w,
                inputs.len()
            );
            let want = &cpu(&f32_layer, &wide(&inputs))[0];
            let like = Tensor::zeros(dtype, want.shape());
            let kind = LayerKind::QuantizedConvolution(l);
            let got = gpu(&dev, &kind, &inputs, &[like]).unwrap_or_else(|e| panic!("{what}: {e}"));
            let rtol = if dtype == DType::F16 { 2e-3 } else { 1e-5 };
            if let Err(e) =
                torchtrt_testing::check_tensor(&widened(&got[0]), want, bound_at(want, rtol))
            {
                panic!("{what}: the GPU against the CPU: {e}");
            }
        }
    }
}

/// Inputs with float tensors widened to f32 (bytes as they are).
fn wide(inputs: &[(Tensor, bool)]) -> Vec<(Tensor, bool)> {
    inputs
        .iter()
        .map(|(t, c)| match t.dtype().is_float() {
            true => (widened(t), *c),
            false => (t.clone(), *c),
        })
        .collect()
}

/// The output quantized as it is written (a fused `Quantize`, I8 and U8 with a zero point),
/// after a residual and ReLU: against the CPU's bytes, at most one step apart (the scaled
/// sum can round either side of a half where the two machines fuse a multiply-add
/// differently), and almost all equal.
#[test]
fn quantized_convolution_writes_quantized_outputs_like_the_cpu() {
    let Some(dev) = device_or_skip() else { return };
    for (i, c) in CASES.iter().enumerate() {
        for (to, zero_point) in [(DType::I8, -3), (DType::U8, 20)] {
            let seed = 9500 + 10 * i as u64;
            let mut l = layer(c, DType::F32, DType::U8, Some(ActivationKind::Relu));
            l.output = Some(OutputQuantization {
                dtype: to,
                scale: 0.05,
                zero_point,
            });
            let mut inputs = vec![
                (bytes(DType::U8, &c.x, seed), false),
                (bytes(DType::I8, &c.w, seed + 1), true),
                (rand(DType::F32, &[c.w[0]], seed + 2), true),
            ];
            let kind = LayerKind::QuantizedConvolution(l);
            let shape = cpu(&kind, &inputs)[0].shape().to_vec();
            inputs.push((rand(DType::F32, &shape, seed + 3), false));
            let want = &cpu(&kind, &inputs)[0];
            let got = gpu(&dev, &kind, &inputs, std::slice::from_ref(want))
                .unwrap_or_else(|e| panic!("case {i} {to}: {e}"));
            let (g, w) = (got[0].to_f64_vec(), want.to_f64_vec());
            let apart = g.iter().zip(&w).filter(|(a, b)| a != b).count();
            let worst = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                worst <= 1.0 && apart * 1000 <= w.len(),
                "case {i} {to}: {apart} of {} bytes differ, by up to {worst}",
                w.len()
            );
        }
    }
}

/// What the kernel does not take is declined (the layer then runs on the host): a non-zero
/// input zero point, input channels not a multiple of 64, several groups.
#[test]
fn quantized_convolution_declines_what_it_does_not_take() {
    let Some(dev) = device_or_skip() else { return };
    let c = &CASES[0];
    let inputs = |channels: usize| {
        vec![
            (bytes(DType::I8, &[1, channels, 8, 8], 1), false),
            (bytes(DType::I8, &[64, channels, 3, 3], 2), true),
        ]
    };
    let base = layer(c, DType::F32, DType::I8, None);
    let kind = |l: QuantizedConvolution| LayerKind::QuantizedConvolution(l);
    assert!(supported(&dev, &kind(base.clone()), &inputs(64)));
    let shifted = QuantizedConvolution {
        input_zero_point: 5,
        ..base.clone()
    };
    assert!(!supported(&dev, &kind(shifted), &inputs(64)));
    assert!(!supported(&dev, &kind(base.clone()), &inputs(96)));
    let mut grouped = base;
    grouped.conv.groups = 2;
    assert!(!supported(&dev, &kind(grouped), &inputs(64)));
}

/// `Quantize` (f32 and f16 to I8 and U8, with zero points, over ties, NaN, ±inf and values
/// that saturate) and `Dequantize` (I8, U8 and I32 to f32 and f16) against the CPU, exactly.
#[test]
fn quantize_and_dequantize_match_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let mut values = random_f32(4099, 31)
        .iter()
        .map(|v| v * 9.0)
        .collect::<Vec<_>>();
    values.extend([
        0.25,
        0.75,
        -0.25,
        1e30,
        -1e30,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ]);
    let n = values.len();
    let x32 = Tensor::from_vec(&[n], values).expect("values");
    for from in [DType::F32, DType::F16] {
        let x = match from {
            DType::F16 => Tensor::from_vec(
                &[n],
                x32.to_f64_vec()
                    .iter()
                    .map(|&v| torchtrt_core::plugin_api::f16::from_f64(v))
                    .collect(),
            )
            .expect("f16"),
            _ => x32.clone(),
        };
        for (to, zp) in [
            (DType::I8, Tensor::scalar(-7i8)),
            (DType::U8, Tensor::scalar(128u8)),
        ] {
            let l = LayerKind::Quantize(Quantize { axis: 0, to });
            let inputs = vec![(x.clone(), false), scalar(0.5), (zp, true)];
            let want = &cpu(&l, &inputs)[0];
            let got = gpu(&dev, &l, &inputs, std::slice::from_ref(want))
                .unwrap_or_else(|e| panic!("Quantize {from} → {to}: {e}"));
            assert_eq!(got[0].bytes(), want.bytes(), "Quantize {from} → {to}");
        }
    }
    for (from, zp) in [
        (DType::I8, Tensor::scalar(3i8)),
        (DType::U8, Tensor::scalar(100u8)),
        (DType::I32, Tensor::scalar(-1000i32)),
    ] {
        for scale in [
            Tensor::scalar(0.037f32),
            Tensor::scalar(torchtrt_core::plugin_api::f16::from_f32(0.037)),
        ] {
            let l = LayerKind::Dequantize(Dequantize { axis: 0 });
            let inputs = vec![
                (bytes(from, &[3, 1000], 41), false),
                (scale.clone(), true),
                (zp.clone(), true),
            ];
            let want = &cpu(&l, &inputs)[0];
            let got = gpu(&dev, &l, &inputs, std::slice::from_ref(want))
                .unwrap_or_else(|e| panic!("Dequantize {from} → {}: {e}", scale.dtype()));
            assert_eq!(
                got[0].bytes(),
                want.bytes(),
                "Dequantize {from} → {}",
                scale.dtype()
            );
        }
    }
}
