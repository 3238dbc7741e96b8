//! Times the core compute layers' CUDA kernels (convolutions of resnet50, mobilenet_v3 and
//! a ViT patch embedding, and a transformer MLP MatMul) with CUDA events: the median of
//! `--iters` runs after `--warmup`, in f16 (or `--dtype f32|bf16`) at batch 1 and 32.
//! Prints one JSON object per line with `ms` and `tflops`, for comparison with PyTorch.
//!
//! `core_bench [--iters N] [--warmup N] [--dtype f16] [--batches 1,32] [--only NAME]`

use half::{bf16, f16};
use torchtrt_core::layers::{
    ActivationKind, Convolution, InferInput, MatMul, Normalization, PoolKind, Pooling, Reduce,
    ReduceOp, Softmax,
};
use torchtrt_core::{LayerKind, Tensor};
use torchtrt_cuda::kernels::{self, PrepareCtx, Programs};
use torchtrt_cuda::{CudaDevice, DeviceBuffer, Event};
use torchtrt_plugin_api::{DType, DeviceTensor, DimExpr, TensorDesc, shape_of_sizes};

type AnyError = Box<dyn std::error::Error>;

/// A layer on inputs (`x` first; the rest constant weights) and its multiply-adds per image.
struct Case {
    name: &'static str,
    layer: LayerKind,
    x: Vec<usize>,
    weights: Vec<Vec<usize>>,
    macs: f64,
    /// Elements read and written per image (memory-bound layers; 0 for the others).
    elems: usize,
}

/// A memory-bound layer on `x` (per image) with constant `weights`.
fn memory_bound(
    name: &'static str,
    layer: LayerKind,
    x: Vec<usize>,
    weights: Vec<Vec<usize>>,
    elems: usize,
) -> Case {
    Case {
        name,
        layer,
        x,
        weights,
        macs: 0.0,
        elems,
    }
}

/// A square convolution `[c, hw, hw]` → `m` channels, kernel `k`, stride `s`, `groups`,
/// with bias (and a fused Relu when `relu`).
fn conv(name: &'static str, [c, hw, m, k, s, groups]: [usize; 6], relu: bool) -> Case {
    let pad = (k / 2) as i64;
    let out = (hw + 2 * (k / 2) - k) / s + 1;
    Case {
        name,
        layer: LayerKind::Convolution(Convolution {
            strides: vec![s as i64; 2],
            pads_begin: vec![pad; 2],
            pads_end: vec![pad; 2],
            dilations: vec![1; 2],
            groups: groups as i64,
            activation: relu.then_some(ActivationKind::Relu),
            channels_last: false,
        }),
        x: vec![c, hw, hw],
        weights: vec![vec![m, c / groups, k, k], vec![m]],
        macs: (m * out * out * (c / groups) * k * k) as f64,
        elems: 0,
    }
}

fn cases() -> Vec<Case> {
    let mut patch = conv("vit_patch16_3x224_768", [3, 224, 768, 16, 16, 1], false);
    if let LayerKind::Convolution(c) = &mut patch.layer {
        c.pads_begin = vec![0; 2];
        c.pads_end = vec![0; 2];
    }
    patch.macs = (768 * 14 * 14 * 3 * 256) as f64;
    vec![
        conv("r50_stem_7x7s2_3_64", [3, 224, 64, 7, 2, 1], true),
        conv("r50_l1_1x1_64_64", [64, 56, 64, 1, 1, 1], true),
        conv("r50_l1_3x3_64_64", [64, 56, 64, 3, 1, 1], true),
        conv("r50_l1_1x1_64_256", [64, 56, 256, 1, 1, 1], false),
        conv("r50_l2_3x3_128_128", [128, 28, 128, 3, 1, 1], true),
        conv("r50_l2_down_1x1s2_256_512", [256, 56, 512, 1, 2, 1], false),
        conv("r50_l3_3x3_256_256", [256, 14, 256, 3, 1, 1], true),
        conv("r50_l3_1x1_1024_256", [1024, 14, 256, 1, 1, 1], true),
        conv("r50_l4_3x3_512_512", [512, 7, 512, 3, 1, 1], true),
        conv("mbv3_dw_3x3_72", [72, 56, 72, 3, 1, 72], true),
        conv("mbv3_dw_5x5s2_72", [72, 56, 72, 5, 2, 72], true),
        conv("mbv3_dw_5x5_480", [480, 14, 480, 5, 1, 480], true),
        patch,
        memory_bound(
            "r50_maxpool_3x3s2_64x112",
            LayerKind::Pooling(Pooling {
                strides: vec![2, 2],
                pads_begin: vec![1, 1],
                pads_end: vec![1, 1],
                ..Pooling::new(PoolKind::Max, vec![3, 3])
            }),
            vec![64, 112, 112],
            vec![],
            64 * 112 * 112 + 64 * 56 * 56,
        ),
        memory_bound(
            "r50_gap_mean_2048x7x7",
            LayerKind::Reduce(Reduce {
                op: ReduceOp::Mean,
                axes: vec![2, 3],
                keep_dims: true,
            }),
            vec![2048, 7, 7],
            vec![],
            2048 * 49 + 2048,
        ),
        memory_bound(
            "vit_softmax_3x197x197",
            LayerKind::Softmax(Softmax {
                axis: -1,
                log: false,
            }),
            vec![3, 197, 197],
            vec![],
            2 * 3 * 197 * 197,
        ),
        memory_bound(
            "vit_layernorm_197x768",
            LayerKind::Normalization(Normalization {
                axes: vec![-1],
                epsilon: 1e-6,
            }),
            vec![197, 768],
            vec![vec![768], vec![768]],
            2 * 197 * 768,
        ),
        Case {
            name: "vit_mlp_matmul_197x768x3072",
            layer: LayerKind::MatMul(MatMul::default()),
            x: vec![197, 768],
            weights: vec![vec![768, 3072]],
            macs: (197 * 768 * 3072) as f64,
            elems: 0,
        },
    ]
}

fn random_bytes(dtype: DType, n: usize, seed: u64) -> Vec<u8> {
    torchtrt_testing::uniform(n, seed, -0.5, 0.5)
        .into_iter()
        .flat_map(|v| match dtype {
            DType::F16 => f16::from_f32(v).to_le_bytes().to_vec(),
            DType::BF16 => bf16::from_f32(v).to_le_bytes().to_vec(),
            _ => v.to_le_bytes().to_vec(),
        })
        .collect()
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), AnyError> {
    let args: Vec<String> = std::env::args().collect();
    let iters: usize = arg(&args, "--iters", 50);
    let warmup: usize = arg(&args, "--warmup", 20);
    let dtype = match arg(&args, "--dtype", "f16".to_string()).as_str() {
        "f32" => DType::F32,
        "bf16" => DType::BF16,
        _ => DType::F16,
    };
    let batches: Vec<usize> = arg(&args, "--batches", "1,32".to_string())
        .split(',')
        .filter_map(|b| b.parse().ok())
        .collect();
    let only: Option<String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let dev = CudaDevice::open(0)?;
    let programs = Programs::new(&dev);
    let stream = dev.new_stream()?;
    let (start, end) = (Event::new(&dev)?, Event::new(&dev)?);
    for case in cases() {
        if only.as_deref().is_some_and(|o| !case.name.contains(o)) {
            continue;
        }
        let weights: Vec<Tensor> = case
            .weights
            .iter()
            .enumerate()
            .map(|(i, s)| {
                Tensor::from_bytes(
                    dtype,
                    s,
                    &random_bytes(dtype, s.iter().product(), 7 + i as u64),
                )
            })
            .collect::<Result<_, _>>()?;
        for &n in &batches {
            let mut xs = case.x.clone();
            if matches!(case.layer, LayerKind::MatMul(_)) {
                xs[0] *= n;
            } else {
                xs.insert(0, n);
            }
            let shapes: Vec<Vec<DimExpr>> = std::iter::once(&xs)
                .chain(&case.weights)
                .map(|s| shape_of_sizes(s))
                .collect();
            let infer: Vec<InferInput<'_>> = shapes
                .iter()
                .enumerate()
                .map(|(i, s)| InferInput {
                    dtype,
                    shape: s,
                    value: i.checked_sub(1).map(|w| &weights[w]),
                })
                .collect();
            let out: Vec<usize> = case.layer.op().infer(&infer)?[0]
                .shape
                .iter()
                .map(|d| d.as_const().unwrap_or(0) as usize)
                .collect();
            let ctx = PrepareCtx {
                device: &dev,
                programs: &programs,
                tf32: false,
                conv_tactic: None,
            };
            let kernel = kernels::prepare(&case.layer, &infer, &ctx).ok_or("no CUDA kernel")??;
            let size = if dtype == DType::F32 { 4 } else { 2 };
            let x_buf = DeviceBuffer::alloc(&dev, xs.iter().product::<usize>() * size)?;
            stream.upload(&random_bytes(dtype, xs.iter().product(), 3), &x_buf)?;
            let y_buf = DeviceBuffer::alloc(&dev, out.iter().product::<usize>() * size)?;
            let tensor = |shape: &[usize], ptr| DeviceTensor {
                desc: TensorDesc::new(dtype, shape.iter().map(|&d| d as i64).collect::<Vec<_>>()),
                ptr,
            };
            let w_bufs: Vec<DeviceBuffer> = weights
                .iter()
                .map(|w| {
                    let b = DeviceBuffer::alloc(&dev, w.bytes().len())?;
                    stream.upload(w.bytes(), &b)?;
                    Ok(b)
                })
                .collect::<Result<_, AnyError>>()?;
            let mut inputs = vec![tensor(&xs, x_buf.ptr())];
            inputs.extend(
                case.weights
                    .iter()
                    .zip(&w_bufs)
                    .map(|(s, b)| tensor(s, b.ptr())),
            );
            let outputs = [tensor(&out, y_buf.ptr())];
            for _ in 0..warmup {
                kernel.execute(&inputs, &outputs, &stream)?;
            }
            let mut times = Vec::with_capacity(iters);
            for _ in 0..iters {
                start.record(&stream)?;
                kernel.execute(&inputs, &outputs, &stream)?;
                end.record(&stream)?;
                end.synchronize()?;
                times.push(start.elapsed_ms(&end)? as f64);
            }
            times.sort_by(f64::total_cmp);
            let ms = times[times.len() / 2];
            let tflops = 2.0 * case.macs * n as f64 / (ms * 1e-3) / 1e12;
            let gbps = (case.elems * size * n) as f64 / (ms * 1e-3) / 1e9;
            println!(
                "{{\"name\":\"{}\",\"dtype\":\"{dtype}\",\"batch\":{n},\"ms\":{ms:.4},\"tflops\":{tflops:.2},\"gbps\":{gbps:.0}}}",
                case.name
            );
        }
    }
    Ok(())
}
