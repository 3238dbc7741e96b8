//! Quantization: `Quantize` and `Dequantize` (per tensor and per axis, with and without zero
//! points, 8 and 16 bits) against their definitions, and `QuantizedConvolution` against the
//! f64 convolution of its dequantized operands: strides, padding, dilations, groups, 1-D to
//! 3-D, bias, residual and every fused activation, on the global pool and on three threads.

use proptest::prelude::*;
use torchtrt_core::Tensor;
use torchtrt_core::layers::{
    ActivationKind, Convolution, Dequantize, OutputQuantization, Quantize, QuantizedConvolution,
    QuantizedMatMul,
};
use torchtrt_core::plugin_api::DType;

use crate::reference::Nd;
use crate::reference::convolution::{ConvParams, conv};
use crate::support::{Rng, Tol, check, global, nd, pooled, random, run, run_on};

/// `count` random bytes of `dtype` (`I8` or `U8`).
fn bytes(dtype: DType, shape: &[usize], rng: &mut Rng) -> Tensor {
    let n: usize = shape.iter().product();
    let raw: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
    Tensor::from_bytes(dtype, shape, &raw).expect("byte tensor")
}

/// The value of byte `b` of a tensor of `dtype`.
fn byte_value(dtype: DType, b: u8) -> i32 {
    match dtype {
        DType::I8 => i32::from(b as i8),
        _ => i32::from(b),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Quantize then dequantize, per tensor or along a random axis, 8 or 16 bits, against
    /// the formulas.
    #[test]
    fn quantize_and_dequantize_follow_their_definitions(
        seed: u64, signed: bool, wide: bool, per_axis: bool, zero_point: bool,
    ) {
        let mut rng = Rng::new(seed);
        let (to, lo, hi) = match (signed, wide) {
            (true, false) => (DType::I8, -128, 127),
            (false, false) => (DType::U8, 0, 255),
            (true, true) => (DType::I16, -32768, 32767),
            (false, true) => (DType::U16, 0, 65535),
        };
        let shape: Vec<usize> = (0..rng.int(1, 4)).map(|_| rng.int(1, 6) as usize).collect();
        let axis = rng.int(0, shape.len() as i64 - 1) as usize;
        let channels = if per_axis { shape[axis] } else { 1 };
        let scale_shape: Vec<usize> = if per_axis { vec![channels] } else { vec![] };
        let range = if wide { 40000.0 } else { 40.0 };
        let x = random(DType::F32, &shape, &mut rng, -range, range);
        let scales: Vec<f32> = (0..channels).map(|_| rng.uniform(0.05, 0.5) as f32).collect();
        let scale = Tensor::from_vec(&scale_shape, scales.clone()).unwrap();
        let zps: Vec<i32> = (0..channels).map(|_| rng.int(lo.into(), hi.into()) as i32).collect();
        let zp = match to {
            DType::I8 => Tensor::from_vec(&scale_shape, zps.iter().map(|&z| z as i8).collect()),
            DType::U8 => Tensor::from_vec(&scale_shape, zps.iter().map(|&z| z as u8).collect()),
            DType::I16 => Tensor::from_vec(&scale_shape, zps.iter().map(|&z| z as i16).collect()),
            _ => Tensor::from_vec(&scale_shape, zps.iter().map(|&z| z as u16).collect()),
        }
        .unwrap();
        let mut inputs = vec![&x, &scale];
        if zero_point {
            inputs.push(&zp);
        }
        let q = run(Quantize { axis: axis as i64, to }, &inputs)?;
        let inner: usize = shape[axis + 1..].iter().product();
        let xv = x.as_slice::<f32>().unwrap();
        let mut want_q = Vec::new();
        let mut want_x = Vec::new();
        for (i, &v) in xv.iter().enumerate() {
            let k = if per_axis { (i / inner) % channels } else { 0 };
            let z = if zero_point { zps[k] } else { 0 };
            let r = (v / scales[k]).round_ties_even() as i32;
            let qv = (r + z).clamp(lo, hi);
            want_q.push(f64::from(qv));
            want_x.push(f64::from((qv - z) as f32 * scales[k]));
        }
        check(&q, &Nd::new(shape.clone(), want_q), Tol::EXACT)?;
        let mut back = vec![&q, &scale];
        if zero_point {
            back.push(&zp);
        }
        let x2 = run(Dequantize { axis: axis as i64 }, &back)?;
        check(&x2, &Nd::new(shape, want_x), Tol::EXACT)?;
    }

    /// Random quantized convolutions against the f64 convolution of their dequantized
    /// operands, with float or quantized outputs.
    #[test]
    fn quantized_convolution_matches_the_dequantized_reference(
        seed: u64, signed: bool, bias: bool, residual: bool, which in 0usize..4, pooled_: bool,
        out in 0usize..3,
    ) {
        quantized_case(seed, signed, bias, residual, which, pooled_, out)?;
    }
}

/// The activation `which` (0: none) and its function.
fn activation(which: usize) -> (Option<ActivationKind>, fn(f64) -> f64) {
    match which {
        0 => (None, |v| v),
        1 => (Some(ActivationKind::Relu), |v| v.max(0.0)),
        2 => (Some(ActivationKind::LeakyRelu { alpha: 0.25 }), |v| {
            if v < 0.0 { v * 0.25 } else { v }
        }),
        _ => (
            Some(ActivationKind::Clip {
                min: -2.0,
                max: 3.0,
            }),
            |v| v.clamp(-2.0, 3.0),
        ),
    }
}

fn quantized_case(
    seed: u64,
    signed: bool,
    bias: bool,
    residual: bool,
    which: usize,
    on_pool: bool,
    out: usize,
) -> Result<(), TestCaseError> {
    let mut rng = Rng::new(seed);
    let spatial = [1, 2, 2, 2, 3][rng.int(0, 4) as usize];
    let groups = if rng.int(0, 3) == 0 {
        rng.int(2, 3) as usize
    } else {
        1
    };
    let (cg, mg) = (rng.int(1, 40) as usize, rng.int(1, 40) as usize);
    let mut xs = vec![rng.int(1, 2) as usize, cg * groups];
    let mut ws = vec![mg * groups, cg];
    let mut p = ConvParams {
        strides: vec![],
        dilations: vec![],
        pads_begin: vec![],
        pads_end: vec![],
        groups,
    };
    for _ in 0..spatial {
        let (k, d, s) = (
            rng.int(1, 3) as usize,
            rng.int(1, 2) as usize,
            rng.int(1, 2) as usize,
        );
        let (pb, pe) = (rng.int(0, 2) as usize, rng.int(0, 2) as usize);
        let span = d * (k - 1) + 1;
        let least = span.saturating_sub(pb + pe).max(1);
        let side = if spatial == 3 { 6 } else { 19 };
        xs.push(rng.int(least as i64, side.max(least as i64)) as usize);
        ws.push(k);
        p.strides.push(s);
        p.dilations.push(d);
        p.pads_begin.push(pb);
        p.pads_end.push(pe);
    }
    let dtype = if signed { DType::I8 } else { DType::U8 };
    let x = bytes(dtype, &xs, &mut rng);
    let w = bytes(DType::I8, &ws, &mut rng);
    let zero_point = byte_value(dtype, rng.next_u64() as u8);
    let input_scale = rng.uniform(0.01, 0.1) as f32;
    let weight_scales: Vec<f32> = (0..ws[0])
        .map(|_| rng.uniform(0.001, 0.05) as f32)
        .collect();
    let deq_x = Nd::new(
        xs.clone(),
        x.bytes()
            .iter()
            .map(|&b| f64::from(byte_value(dtype, b) - zero_point) * f64::from(input_scale))
            .collect(),
    );
    let per_m = w.numel() / ws[0];
    let deq_w = Nd::new(
        ws.clone(),
        w.bytes()
            .iter()
            .enumerate()
            .map(|(i, &b)| f64::from(b as i8) * f64::from(weight_scales[i / per_m]))
            .collect(),
    );
    let b = random(DType::F32, &[ws[0]], &mut rng, -1.0, 1.0);
    let mut want = conv(&deq_x, &deq_w, bias.then(|| nd(&b)).as_ref(), &p);
    let r = random(DType::F32, &want.shape, &mut rng, -1.0, 1.0);
    let (kind, f) = activation(which);
    let rv = r.to_f64_vec();
    for (i, v) in want.data.iter_mut().enumerate() {
        *v = f(*v + if residual { rv[i] } else { 0.0 });
    }
    let layer = QuantizedConvolution {
        conv: Convolution {
            strides: p.strides.iter().map(|&v| v as i64).collect(),
            pads_begin: p.pads_begin.iter().map(|&v| v as i64).collect(),
            pads_end: p.pads_end.iter().map(|&v| v as i64).collect(),
            dilations: p.dilations.iter().map(|&v| v as i64).collect(),
            groups: groups as i64,
            activation: kind,
            channels_last: false,
        },
        input_scale,
        input_zero_point: zero_point,
        weight_scales,
        dtype: DType::F32,
        output: [None, Some(DType::I8), Some(DType::U8)][out].map(|dtype| OutputQuantization {
            dtype,
            scale: rng.uniform(0.02, 0.2) as f32,
            zero_point: byte_value(dtype, rng.next_u64() as u8),
        }),
    };
    let no_bias = Tensor::zeros(DType::F32, &[ws[0]]);
    let inputs = match (bias, residual) {
        (true, true) => vec![&x, &w, &b, &r],
        (false, true) => vec![&x, &w, &no_bias, &r],
        (true, false) => vec![&x, &w, &b],
        (false, false) => vec![&x, &w],
    };
    let backend: &dyn torchtrt_core::Backend = if on_pool { pooled() } else { global() };
    let quantization = layer.output;
    let got = run_on(backend, layer, &inputs).map_err(TestCaseError::fail)?;
    let taps: usize = ws[1..].iter().product();
    let Some(q) = quantization else {
        return check(
            &got[0],
            &want,
            Tol::of(DType::F32).scaled((taps as f64).sqrt() * 2.0),
        );
    };
    let (lo, hi) = if q.dtype == DType::I8 {
        (-128, 127)
    } else {
        (0, 255)
    };
    let (s, z) = (f64::from(q.scale), q.zero_point);
    for (i, (&b, &v)) in got[0].bytes().iter().zip(&want.data).enumerate() {
        let expected = (v / s).round() as i64 + i64::from(z);
        let expected = expected.clamp(lo, hi);
        let got = i64::from(byte_value(q.dtype, b));
        prop_assert!(
            (got - expected).abs() <= 1
                && (got == expected || ((v / s).fract().abs() - 0.5).abs() < 1e-3),
            "element {i}: {got}, reference {v} quantizes to {expected}"
        );
    }
    Ok(())
}

/// Layers the size of ResNet's (3×3 over 64 channels on 56×56, a 1×1 of 256 → 64) take
/// several column tiles and row tiles; every output against the reference.
#[test]
fn resnet_sized_layers_match_the_reference() {
    for (i, (xs, ws, pad)) in [
        (vec![1, 64, 56, 56], vec![64, 64, 3, 3], 1),
        (vec![2, 256, 14, 14], vec![64, 256, 1, 1], 0),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rng = Rng::new(90 + i as u64);
        let x = bytes(DType::I8, &xs, &mut rng);
        let w = bytes(DType::I8, &ws, &mut rng);
        let scales: Vec<f32> = (0..ws[0])
            .map(|_| rng.uniform(0.001, 0.01) as f32)
            .collect();
        let per_m = w.numel() / ws[0];
        let deq_x = Nd::new(
            xs.clone(),
            x.bytes()
                .iter()
                .map(|&b| f64::from(b as i8) * 0.05)
                .collect(),
        );
        let deq_w = Nd::new(
            ws.clone(),
            w.bytes()
                .iter()
                .enumerate()
                .map(|(i, &b)| f64::from(b as i8) * f64::from(scales[i / per_m]))
                .collect(),
        );
        let p = ConvParams {
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads_begin: vec![pad; 2],
            pads_end: vec![pad; 2],
            groups: 1,
        };
        let want = conv(&deq_x, &deq_w, None, &p);
        let mut c = Convolution::new(2);
        c.pads_begin = vec![pad as i64; 2];
        c.pads_end = vec![pad as i64; 2];
        let layer = QuantizedConvolution {
            conv: c,
            input_scale: 0.05,
            input_zero_point: 0,
            weight_scales: scales,
            dtype: DType::F32,
            output: None,
        };
        let got = run(layer, &[&x, &w]).unwrap();
        check(&got, &want, Tol::of(DType::F32).scaled(50.0)).unwrap();
    }
}

/// Ties round to even, NaN goes to the zero point, infinities and large values saturate: on
/// the SIMD path and at every run length (a scale per element of the last axis).
#[test]
fn quantize_rounds_ties_to_even_and_saturates() {
    let values = [
        2.5f32,
        3.5,
        -2.5,
        -0.5,
        0.5,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e30,
        -1e30,
        117.5,
        118.5,
    ];
    let n = values.len();
    let x = Tensor::from_vec(&[2, n], [values, values].concat()).unwrap();
    let want = |zp: i32, lo: i32, hi: i32| -> Vec<f64> {
        let (top, bottom) = (i32::MAX, i32::MIN);
        let one = [2, 4, -2, 0, 0, 0, top, bottom, top, bottom, 118, 118];
        let row: Vec<f64> = one
            .iter()
            .map(|&q| f64::from(q.saturating_add(zp).clamp(lo, hi)))
            .collect();
        [row.clone(), row].concat()
    };
    let scalar = Tensor::scalar(1f32);
    let q = run(
        Quantize {
            axis: 1,
            to: DType::I8,
        },
        &[&x, &scalar],
    )
    .unwrap();
    check(&q, &Nd::new(vec![2, n], want(0, -128, 127)), Tol::EXACT).unwrap();
    let zp = Tensor::from_vec(&[], vec![10u8]).unwrap();
    let q = run(
        Quantize {
            axis: 1,
            to: DType::U8,
        },
        &[&x, &scalar, &zp],
    )
    .unwrap();
    check(&q, &Nd::new(vec![2, n], want(10, 0, 255)), Tol::EXACT).unwrap();
    let ones = Tensor::from_vec(&[n], vec![1f32; n]).unwrap();
    let q = run(
        Quantize {
            axis: 1,
            to: DType::I8,
        },
        &[&x, &ones],
    )
    .unwrap();
    check(&q, &Nd::new(vec![2, n], want(0, -128, 127)), Tol::EXACT).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random quantized products (batched inputs, ragged tokens, depths and columns) against
    /// the f64 product of their dequantized operands, with float or quantized outputs.
    #[test]
    fn quantized_matmul_matches_the_dequantized_reference(
        seed: u64, signed: bool, bias: bool, pooled_: bool, out in 0usize..3,
    ) {
        let mut rng = Rng::new(seed);
        let (batch, m, k, n) = (
            rng.int(1, 3) as usize,
            rng.int(1, 70) as usize,
            rng.int(1, 150) as usize,
            rng.int(1, 40) as usize,
        );
        let dtype = if signed { DType::I8 } else { DType::U8 };
        let a = bytes(dtype, &[batch, m, k], &mut rng);
        let w = bytes(DType::I8, &[n, k], &mut rng);
        let zero_point = byte_value(dtype, rng.next_u64() as u8);
        let input_scale = rng.uniform(0.01, 0.1) as f32;
        let scales: Vec<f32> = (0..n).map(|_| rng.uniform(0.001, 0.05) as f32).collect();
        let b = random(DType::F32, &[n], &mut rng, -1.0, 1.0);
        let bv = b.to_f64_vec();
        let mut want = Vec::new();
        for t in 0..batch * m {
            for j in 0..n {
                let sum: f64 = (0..k)
                    .map(|i| {
                        let x = f64::from(byte_value(dtype, a.bytes()[t * k + i]) - zero_point);
                        x * f64::from(w.bytes()[j * k + i] as i8)
                    })
                    .sum();
                let v = sum * f64::from(input_scale) * f64::from(scales[j]);
                want.push(v + if bias { bv[j] } else { 0.0 });
            }
        }
        let output = [None, Some(DType::I8), Some(DType::U8)][out].map(|dtype| OutputQuantization {
            dtype,
            scale: rng.uniform(0.02, 0.2) as f32,
            zero_point: byte_value(dtype, rng.next_u64() as u8),
        });
        let layer = QuantizedMatMul {
            input_scale,
            input_zero_point: zero_point,
            weight_scales: scales,
            dtype: DType::F32,
            output,
        };
        let inputs = if bias { vec![&a, &w, &b] } else { vec![&a, &w] };
        let backend: &dyn torchtrt_core::Backend = if pooled_ { pooled() } else { global() };
        let got = run_on(backend, layer, &inputs).map_err(TestCaseError::fail)?;
        let want = Nd::new(vec![batch, m, n], want);
        match output {
            None => check(&got[0], &want, Tol::of(DType::F32).scaled((k as f64).sqrt() * 2.0))?,
            Some(q) => {
                let (lo, hi) = if q.dtype == DType::I8 { (-128, 127) } else { (0, 255) };
                let s = f64::from(q.scale);
                for (i, (&g, &v)) in got[0].bytes().iter().zip(&want.data).enumerate() {
                    let expected = ((v / s).round() as i64 + i64::from(q.zero_point)).clamp(lo, hi);
                    let g = i64::from(byte_value(q.dtype, g));
                    let tie = ((v / s).fract().abs() - 0.5).abs() < 1e-3;
                    prop_assert!(g == expected || (tie && (g - expected).abs() <= 1),
                        "element {i}: {g}, reference {v} quantizes to {expected}");
                }
            }
        }
    }
}
