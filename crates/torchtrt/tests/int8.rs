//! INT8 engines on the CPU (and, with a GPU, on CUDA). Calibrated: PyTorch-exported torchvision networks, calibrated
//! on a few random inputs, run their convolutions on 8-bit integers and agree with f32 on
//! other inputs (top-1 and relative error). Explicit: a network's own quantize/dequantize pairs
//! around convolutions fuse into integer convolutions (batch-norm scales folded into the
//! weight scales) and compute what the unfused pairs compute; pairs that cannot fuse stay and
//! still compute. Engines survive serialization.

mod common;

use std::sync::Arc;

use common::{assert_close, random_f32};
use torchtrt::layers::{
    Activation, ActivationKind, Convolution, Dequantize, Elementwise, ElementwiseOp, LayerKind,
    Quantize,
};
use torchtrt::plugin_api::DType;
use torchtrt::{BuildConfig, Dim, Engine, NetworkDefinition, Tensor, TensorId};

fn run(engine: &Engine, input: &Tensor) -> Vec<Tensor> {
    engine.create_context().unwrap().execute(&[input]).unwrap()
}

fn count(engine: &Engine, kind: &str) -> usize {
    let plan = engine.plan();
    plan.layers
        .iter()
        .filter(|l| l.kind.op().kind() == kind)
        .count()
}

/// Where `scripts/gen_torch_programs.py` put the PyTorch test programs
/// (`TORCHTRT_TORCH_PROGRAMS` or `target/torch-programs`, which `scripts/test` fills).
fn program(name: &str) -> std::path::PathBuf {
    let root = std::env::var_os("TORCHTRT_TORCH_PROGRAMS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/torch-programs")
        });
    let path = root.join(name).join("exported.pt2");
    assert!(
        path.exists(),
        "{} is missing: run scripts/gen_torch_programs.py target/torch-programs",
        path.display()
    );
    path
}

/// The class each row of `[n, classes]` logits picks.
fn top1(logits: &Tensor) -> Vec<usize> {
    let v = logits.as_slice::<f32>().unwrap();
    let classes = logits.shape()[1];
    v.chunks_exact(classes)
        .map(|row| (0..classes).fold(0, |b, i| if row[i] > row[b] { i } else { b }))
        .collect()
}

/// ResNet-18 and MobileNet-V3 (torchvision, seeded random weights, exported by PyTorch),
/// calibrated on four batches of random images: their convolutions run on integers, and on
/// 64 other images the logits stay close to f32 and pick the same class.
#[test]
fn calibrated_torchvision_networks_agree_with_f32() {
    for (name, least_quantized) in [("resnet18", 20), ("mobilenet_v3_small", 30)] {
        let options = torchtrt::torch::ImportOptions::default();
        let net = torchtrt::import_pt2(program(name), options).unwrap();
        let input = net.inputs()[0].name.clone();
        let images =
            |seed| Tensor::from_vec(&[8, 3, 64, 64], random_f32(8 * 3 * 64 * 64, seed)).unwrap();
        let batches: Vec<Vec<(String, Tensor)>> = (0..4)
            .map(|s| vec![(input.clone(), images(100 + s))])
            .collect();
        let calibration = torchtrt::calibrate(&net, &batches).unwrap();
        let int8 = BuildConfig {
            int8: Some(Arc::new(calibration)),
            ..BuildConfig::default()
        };
        let engine = torchtrt::compile(&net, &int8).unwrap();
        let plain = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
        let quantized = count(&engine, "QuantizedConvolution");
        assert!(
            quantized >= least_quantized,
            "{name}: {quantized} convolutions quantized"
        );
        let (mut agree, mut total, mut worst) = (0, 0, 0f32);
        for s in 0..8 {
            let x = images(200 + s);
            let (got, want) = (run(&engine, &x), run(&plain, &x));
            let (g, w) = (
                got[0].as_slice::<f32>().unwrap(),
                want[0].as_slice::<f32>().unwrap(),
            );
            let err: f32 = g
                .iter()
                .zip(w)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f32>()
                .sqrt();
            let norm: f32 = w.iter().map(|v| v * v).sum::<f32>().sqrt();
            worst = worst.max(err / norm);
            let (a, b) = (top1(&got[0]), top1(&want[0]));
            agree += a.iter().zip(&b).filter(|(x, y)| x == y).count();
            total += a.len();
        }
        eprintln!(
            "{name}: {quantized} quantized, top-1 {agree}/{total}, worst relative error {worst:.4}"
        );
        assert!(worst <= 0.1, "{name}: relative error {worst}");
        assert!(
            agree * 10 >= total * 9,
            "{name}: top-1 agrees on {agree} of {total}"
        );
    }
}

/// `[m, c, k, k]` weights quantized to `I8` per output channel, and their scales.
fn int8_weights(m: usize, c: usize, k: usize, seed: u64) -> (Tensor, Tensor) {
    let w = random_f32(m * c * k * k, seed);
    let q: Vec<i8> = w.iter().map(|v| (v * 127.0).round() as i8).collect();
    let scales: Vec<f32> = (0..m).map(|i| 0.002 + 0.001 * i as f32).collect();
    (
        Tensor::from_vec(&[m, c, k, k], q).unwrap(),
        Tensor::from_vec(&[m], scales).unwrap(),
    )
}

/// `Dequantize(Quantize(x, scale, zero_point), scale, zero_point)` in `to`.
fn fake_quantize(
    net: &mut NetworkDefinition,
    name: &str,
    x: TensorId,
    to: DType,
    (scale, zero_point): (f32, u8),
) -> TensorId {
    let s = net
        .add_constant(&format!("{name}_s"), Tensor::scalar(scale))
        .unwrap();
    let z = Tensor::from_bytes(to, &[], &[zero_point]).unwrap();
    let z = net.add_constant(&format!("{name}_z"), z).unwrap();
    let q = net
        .add(&format!("{name}_q"), Quantize { axis: 1, to }, &[x, s, z])
        .unwrap();
    net.add(&format!("{name}_dq"), Dequantize { axis: 1 }, &[q, s, z])
        .unwrap()
}

/// A 3×3 convolution (padded, bias) reading `x` with weights dequantized from `I8` per
/// output channel (`zero_point`: the weights' zero points, all this value).
fn qdq_conv(
    net: &mut NetworkDefinition,
    name: &str,
    x: TensorId,
    [m, c]: [usize; 2],
    zero_point: i8,
    seed: u64,
) -> TensorId {
    let (q, s) = int8_weights(m, c, 3, seed);
    let q = net.add_constant(&format!("{name}_wq"), q).unwrap();
    let s = net.add_constant(&format!("{name}_ws"), s).unwrap();
    let z = Tensor::from_vec(&[m], vec![zero_point; m]).unwrap();
    let z = net.add_constant(&format!("{name}_wz"), z).unwrap();
    let w = net
        .add(&format!("{name}_w"), Dequantize { axis: 0 }, &[q, s, z])
        .unwrap();
    let b = Tensor::from_vec(&[m], random_f32(m, seed + 1)).unwrap();
    let b = net.add_constant(&format!("{name}_b"), b).unwrap();
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    net.add(name, conv, &[x, w, b]).unwrap()
}

/// `x · s + t` per channel (an exported batch norm), then ReLU.
fn bn_relu(net: &mut NetworkDefinition, name: &str, x: TensorId, c: usize, seed: u64) -> TensorId {
    let s = Tensor::from_vec(&[1, c, 1, 1], random_f32(c, seed)).unwrap();
    let t = Tensor::from_vec(&[1, c, 1, 1], random_f32(c, seed + 1)).unwrap();
    let s = net.add_constant(&format!("{name}_s"), s).unwrap();
    let t = net.add_constant(&format!("{name}_t"), t).unwrap();
    let y = net
        .add(
            &format!("{name}_mul"),
            Elementwise::new(ElementwiseOp::Mul),
            &[x, s],
        )
        .unwrap();
    let y = net
        .add(
            &format!("{name}_add"),
            Elementwise::new(ElementwiseOp::Add),
            &[y, t],
        )
        .unwrap();
    let relu = Activation {
        kind: ActivationKind::Relu,
    };
    net.add(&format!("{name}_relu"), relu, &[y]).unwrap()
}

/// x → QDQ(I8) → conv → BN → ReLU → QDQ(U8, zero point 7) → conv → BN → ReLU → QDQ(I8) →
/// conv with weights of zero point `last_zero_point`.
fn qdq_network(last_zero_point: i8) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[
                Dim::dynamic("n", 1, 2, 3),
                Dim::Fixed(8),
                Dim::Fixed(12),
                Dim::Fixed(12),
            ],
        )
        .unwrap();
    let a = fake_quantize(&mut net, "in", x, DType::I8, (0.02, 0));
    let a = qdq_conv(&mut net, "conv1", a, [24, 8], 0, 1);
    let a = bn_relu(&mut net, "bn1", a, 24, 10);
    let a = fake_quantize(&mut net, "mid", a, DType::U8, (0.01, 7));
    let a = qdq_conv(&mut net, "conv2", a, [16, 24], 0, 2);
    let a = bn_relu(&mut net, "bn2", a, 16, 20);
    let a = fake_quantize(&mut net, "out", a, DType::I8, (0.01, 0));
    let y = qdq_conv(&mut net, "conv3", a, [8, 16], last_zero_point, 3);
    net.mark_output(y, "y").unwrap();
    net
}

#[test]
fn explicit_quantize_dequantize_pairs_fuse_into_integer_convolutions() {
    for last_zero_point in [0, 3] {
        let net = qdq_network(last_zero_point);
        let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
        let reference = BuildConfig {
            fold_constants: false,
            ..BuildConfig::default()
        };
        let plain = torchtrt::compile(&net, &reference).unwrap();
        let fused = if last_zero_point == 0 { 3 } else { 2 };
        assert_eq!(count(&engine, "QuantizedConvolution"), fused);
        assert_eq!(count(&engine, "Convolution"), 3 - fused);
        assert_eq!(count(&plain, "QuantizedConvolution"), 0);
        assert_eq!(count(&engine, "Dequantize"), 3 - fused);
        assert_eq!(
            count(&engine, "Quantize"),
            1,
            "the quantizations after convolutions fuse"
        );
        let bytes = engine.serialize();
        let loaded = torchtrt::Runtime::new()
            .unwrap()
            .deserialize(&bytes)
            .unwrap();
        for n in [1, 3] {
            let x =
                Tensor::from_vec(&[n, 8, 12, 12], random_f32(n * 8 * 144, 5 + n as u64)).unwrap();
            let want = run(&plain, &x);
            let w = want[0].as_slice::<f32>().unwrap();
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            for e in [&engine, &loaded] {
                let got = run(e, &x);
                assert_close(got[0].as_slice::<f32>().unwrap(), w, 1e-5 * scale, 1e-4);
            }
        }
    }
}

#[test]
fn convolutions_without_a_quantized_input_stay_in_float() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::Fixed(1), Dim::Fixed(8), Dim::Fixed(6), Dim::Fixed(6)],
        )
        .unwrap();
    let y = qdq_conv(&mut net, "conv", x, [4, 8], 0, 9);
    net.mark_output(y, "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    assert_eq!(count(&engine, "QuantizedConvolution"), 0);
    assert!(
        engine
            .plan()
            .layers
            .iter()
            .any(|l| matches!(l.kind, LayerKind::Convolution(_)))
    );
}

/// Deterministic token ids in `0..vocab` and an all-ones mask, `[batch, seq]` i64 each.
fn tokens(batch: usize, seq: usize, vocab: usize, seed: u64) -> Vec<(String, Tensor)> {
    let ids: Vec<i64> = random_f32(batch * seq, seed)
        .iter()
        .map(|v| ((v + 1.0) * 0.5 * vocab as f32) as i64 % vocab as i64)
        .collect();
    vec![
        (
            "input_ids".into(),
            Tensor::from_vec(&[batch, seq], ids).unwrap(),
        ),
        (
            "attention_mask".into(),
            Tensor::from_vec(&[batch, seq], vec![1i64; batch * seq]).unwrap(),
        ),
    ]
}

/// The relative L2 distance of `got` from `want`.
fn relative_error(got: &Tensor, want: &Tensor) -> f32 {
    let (g, w) = (
        got.as_slice::<f32>().unwrap(),
        want.as_slice::<f32>().unwrap(),
    );
    let err: f32 = g
        .iter()
        .zip(w)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f32>()
        .sqrt();
    err / w.iter().map(|v| v * v).sum::<f32>().sqrt()
}

/// A ViT and BERT (PyTorch exports, seeded random weights) calibrated on random inputs run
/// their linear layers as integer products and stay close to f32 on other inputs.
#[test]
fn calibrated_transformers_run_their_linear_layers_on_integers() {
    let vit = torchtrt::import_pt2(program("vit_tiny"), Default::default()).unwrap();
    let images =
        |seed| Tensor::from_vec(&[4, 3, 32, 32], random_f32(4 * 3 * 32 * 32, seed)).unwrap();
    let name = vit.inputs()[0].name.clone();
    let batches: Vec<_> = (0..4)
        .map(|s| vec![(name.clone(), images(300 + s))])
        .collect();
    let bert = torchtrt::import_pt2(program("bert_tiny"), Default::default()).unwrap();
    let sentences: Vec<_> = (0..4).map(|s| tokens(4, 16, 99, 400 + s)).collect();
    for (label, net, batches, eval) in [
        ("vit_tiny", &vit, batches, vec![(name.clone(), images(500))]),
        ("bert_tiny", &bert, sentences, tokens(3, 12, 99, 600)),
    ] {
        let calibration = torchtrt::calibrate(net, &batches).unwrap();
        let int8 = BuildConfig {
            int8: Some(Arc::new(calibration)),
            ..BuildConfig::default()
        };
        let engine = torchtrt::compile(net, &int8).unwrap();
        let plain = torchtrt::compile(net, &BuildConfig::default()).unwrap();
        let products = count(&engine, "QuantizedMatMul");
        assert!(products >= 8, "{label}: {products} integer products");
        let feeds: Vec<(&str, &Tensor)> = eval.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let got = engine
            .create_context()
            .unwrap()
            .execute_named(&feeds)
            .unwrap();
        let want = plain
            .create_context()
            .unwrap()
            .execute_named(&feeds)
            .unwrap();
        for ((name, g), (_, w)) in got.iter().zip(&want) {
            let err = relative_error(g, w);
            eprintln!("{label} {name}: {products} integer products, relative error {err:.4}");
            assert!(err < 0.05, "{label} {name}: relative error {err}");
        }
    }
}

/// A `k`×`k` float convolution (bias, "same" padding, `stride`) of `x` to `m` channels.
fn float_conv(
    net: &mut NetworkDefinition,
    name: &str,
    x: TensorId,
    [m, c, k]: [usize; 3],
    stride: i64,
    seed: u64,
) -> TensorId {
    let scale = 1.0 / ((c * k * k) as f32).sqrt();
    let w: Vec<f32> = random_f32(m * c * k * k, seed)
        .iter()
        .map(|v| v * scale)
        .collect();
    let w = net
        .add_constant(
            &format!("{name}_w"),
            Tensor::from_vec(&[m, c, k, k], w).unwrap(),
        )
        .unwrap();
    let b = Tensor::from_vec(&[m], random_f32(m, seed + 1)).unwrap();
    let b = net.add_constant(&format!("{name}_b"), b).unwrap();
    let mut conv = Convolution::new(2);
    let pad = (k / 2) as i64;
    conv.pads_begin = vec![pad, pad];
    conv.pads_end = vec![pad, pad];
    conv.strides = vec![stride, stride];
    net.add(name, conv, &[x, w, b]).unwrap()
}

/// A small ResNet: a 3-channel stem, then 64 → 64 (3×3), 64 → 128 (1×1, stride 2) and a
/// residual block of two 3×3 128-channel convolutions, each with batch norm and ReLU.
fn small_resnet() -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 4, 8), 3.into(), 20.into(), 20.into()],
        )
        .unwrap();
    let a = float_conv(&mut net, "stem", x, [64, 3, 3], 1, 1);
    let a = bn_relu(&mut net, "bn0", a, 64, 2);
    let a = float_conv(&mut net, "conv1", a, [64, 64, 3], 1, 3);
    let a = bn_relu(&mut net, "bn1", a, 64, 4);
    let a = float_conv(&mut net, "down", a, [128, 64, 1], 2, 5);
    let a = bn_relu(&mut net, "bn2", a, 128, 6);
    let b = float_conv(&mut net, "block1", a, [128, 128, 3], 1, 7);
    let b = bn_relu(&mut net, "bn3", b, 128, 8);
    let b = float_conv(&mut net, "block2", b, [128, 128, 3], 1, 9);
    let sum = net
        .add("residual", Elementwise::new(ElementwiseOp::Add), &[a, b])
        .unwrap();
    let relu = Activation {
        kind: ActivationKind::Relu,
    };
    let y = net.add("out", relu, &[sum]).unwrap();
    net.mark_output(y, "y").unwrap();
    net
}

/// On a GPU: a calibrated INT8 build for CUDA runs every convolution with 64 or more
/// channels on integer tensor cores (the 3-channel stem stays f16), nothing falls back to
/// the host, the engine reloads, and its outputs stay close to the CPU's f32; a Q/DQ model
/// whose channel counts the integer kernel does not take runs its quantize/dequantize pairs
/// as CUDA kernels and computes what the CPU computes, within f16's rounding (which can move
/// a value to the neighbouring quantization step).
#[test]
fn calibrated_cuda_engines_run_convolutions_on_integer_tensor_cores() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let net = small_resnet();
    let images =
        |n: usize, seed| Tensor::from_vec(&[n, 3, 20, 20], random_f32(n * 1200, seed)).unwrap();
    let batches: Vec<Vec<(String, Tensor)>> = (0..4)
        .map(|s| vec![("x".to_string(), images(4, 300 + s))])
        .collect();
    let config = BuildConfig {
        precision: DType::F16,
        int8: Some(Arc::new(torchtrt::calibrate(&net, &batches).unwrap())),
        ..BuildConfig::default()
    };
    let engine = torchtrt::compile_for(&net, &config, "cuda:0").unwrap();
    let summary = engine.summary();
    assert_eq!(count(&engine, "QuantizedConvolution"), 4, "{summary}");
    assert_eq!(count(&engine, "Convolution"), 1, "{summary}");
    assert!(summary.layers.iter().all(|l| !l.host_fallback), "{summary}");
    let loaded = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&engine.serialize())
        .unwrap();
    let cpu = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    for n in [1, 5] {
        let x = images(n, 400 + n as u64);
        let want = run(&cpu, &x);
        for e in [&engine, &loaded] {
            let err = relative_error(&run(e, &x)[0], &want[0]);
            assert!(err < 0.05, "batch {n}: relative error {err}");
        }
    }

    let net = qdq_network(0);
    let f16 = BuildConfig {
        precision: DType::F16,
        ..BuildConfig::default()
    };
    let engine = torchtrt::compile_for(&net, &f16, "cuda:0").unwrap();
    let summary = engine.summary();
    assert_eq!(count(&engine, "QuantizedConvolution"), 0, "{summary}");
    assert!(summary.layers.iter().all(|l| !l.host_fallback), "{summary}");
    let plain = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let x = Tensor::from_vec(&[2, 8, 12, 12], random_f32(2 * 8 * 144, 77)).unwrap();
    let err = relative_error(&run(&engine, &x)[0], &run(&plain, &x)[0]);
    assert!(err < 0.02, "Q/DQ network: relative error {err}");
}

/// Percentile calibration clips a tensor's range at the magnitude most of its values stay
/// under, where min/max calibration stretches it to one outlier; the 100th percentile keeps
/// the whole range, and percentiles outside (0, 100] are refused.
#[test]
fn percentile_calibration_clips_outliers() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[1, 1, 100, 100].map(|d| Dim::Fixed(d as i64)),
        )
        .unwrap();
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[2, 1, 1, 1], vec![0.5f32, -0.25]).unwrap(),
        )
        .unwrap();
    let y = net.add("conv", Convolution::new(2), &[x, w]).unwrap();
    net.mark_output(y, "y").unwrap();
    let mut values = random_f32(10_000, 7);
    let (least, most) = values
        .iter()
        .fold((f32::MAX, f32::MIN), |(l, m), &v| (l.min(v), m.max(v)));
    values[4321] = 50.0;
    let batch = vec![vec![(
        "x".to_string(),
        Tensor::from_vec(&[1, 1, 100, 100], values).unwrap(),
    )]];
    let range = |c| torchtrt::calibrate_with(&net, &batch, c).unwrap().ranges["x"];
    let whole = range(torchtrt::Calibrator::MinMax);
    assert_eq!((whole.min, whole.max), (least, 50.0));
    let clipped = range(torchtrt::Calibrator::Percentile(99.99));
    let bin = 50.0 / 2048.0;
    assert_eq!(clipped.min, least, "the clip lies outside the least value");
    assert!(
        clipped.max >= most.max(-least) && clipped.max <= most.max(-least) + bin,
        "clipped at {} for values within {least}..{most}",
        clipped.max
    );
    assert_eq!(range(torchtrt::Calibrator::Percentile(100.0)), whole);
    for bad in [0.0, -1.0, 100.5, f64::NAN] {
        assert!(
            torchtrt::calibrate_with(&net, &batch, torchtrt::Calibrator::Percentile(bad)).is_err()
        );
    }
}
