//! Throughput of the main kernels: `cargo bench -p torchtrt-cpu [-- FILTER]`.
//!
//! Prints the median time of each case and its rate (GFLOP/s for products, GB/s of
//! tensor traffic for the rest), for comparison with the machine's copy bandwidth.

use std::time::{Duration, Instant};

use torchtrt_core::layers::*;
use torchtrt_core::plugin_api::{DType, ShapeExpr, const_shape, shape_values};
use torchtrt_core::tensor::shape_i64;
use torchtrt_core::{Backend, InferInput, LayerKind, Tensor};
use torchtrt_cpu::CpuBackend;

/// What a case's rate counts.
enum Rate {
    /// Floating-point operations per run.
    Flops(f64),
    /// Bytes read and written per run.
    Bytes(f64),
}

fn filled(dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 250.0)
        .collect();
    let t = Tensor::from_vec(shape, values).expect("shape");
    match dtype {
        DType::F32 => t,
        DType::F16 => Tensor::from_vec(
            shape,
            t.to_f64_vec()
                .iter()
                .map(|&v| half::f16::from_f64(v))
                .collect(),
        )
        .expect("shape"),
        other => panic!("no bench data for {other}"),
    }
}

fn bench(
    backend: &CpuBackend,
    name: &str,
    layer: impl Into<LayerKind>,
    inputs: &[Tensor],
    rate: Rate,
) {
    let filter = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    if filter.is_some_and(|f| !name.contains(&f)) {
        return;
    }
    let layer = layer.into();
    let shapes: Vec<ShapeExpr> = inputs
        .iter()
        .map(|t| const_shape(&shape_i64(t.shape())))
        .collect();
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .zip(&shapes)
        .map(|(t, shape)| InferInput {
            dtype: t.dtype(),
            shape,
            value: Some(t),
        })
        .collect();
    let types = layer.op().infer(&infer).expect("shape rule");
    let kernel = backend.prepare(&layer, &infer).expect("prepare");
    let mut outputs: Vec<Tensor> = types
        .iter()
        .map(|ts| {
            let dims: Vec<usize> = shape_values(&ts.shape)
                .expect("concrete")
                .iter()
                .map(|&d| d as usize)
                .collect();
            Tensor::zeros(ts.dtype, &dims)
        })
        .collect();
    let refs: Vec<&Tensor> = inputs.iter().collect();
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < Duration::from_secs(1) && times.len() < 200) {
        let t = Instant::now();
        kernel.execute(&refs, &mut outputs).expect("execute");
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let (value, unit) = match rate {
        Rate::Flops(f) => (f / median / 1e9, "GFLOP/s"),
        Rate::Bytes(b) => (b / median / 1e9, "GB/s"),
    };
    println!("{name:<40} {:>9.3} ms {value:>8.1} {unit}", median * 1e3);
}

fn main() {
    let backend = CpuBackend::new();
    let b = &backend;
    let f32s = |shape: &[usize]| filled(DType::F32, shape);
    let mb = |n: usize, io: usize| Rate::Bytes((n * io) as f64);

    bench(
        b,
        "matmul f32 512x512x512",
        MatMul::default(),
        &[f32s(&[512, 512]), f32s(&[512, 512])],
        Rate::Flops(2.0 * 512f64.powi(3)),
    );
    bench(
        b,
        "matmul f16 512x512x512",
        MatMul::default(),
        &[
            filled(DType::F16, &[512, 512]),
            filled(DType::F16, &[512, 512]),
        ],
        Rate::Flops(2.0 * 512f64.powi(3)),
    );
    bench(
        b,
        "matmul f32 64x(32x64 · 64x32ᵀ)",
        MatMul {
            transpose_a: false,
            transpose_b: true,
        },
        &[f32s(&[64, 32, 64]), f32s(&[64, 32, 64])],
        Rate::Flops(2.0 * 64.0 * 32.0 * 32.0 * 64.0),
    );
    bench(
        b,
        "linear f32 [8,128,768]·[768,768]",
        MatMul::default(),
        &[f32s(&[8, 128, 768]), f32s(&[768, 768])],
        Rate::Flops(2.0 * 1024.0 * 768.0 * 768.0),
    );

    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    bench(
        b,
        "conv3x3 f32 [1,64,56,56]→64",
        conv.clone(),
        &[f32s(&[1, 64, 56, 56]), f32s(&[64, 64, 3, 3])],
        Rate::Flops(2.0 * 64.0 * 64.0 * 9.0 * 56.0 * 56.0),
    );
    bench(
        b,
        "conv1x1 f32 [4,256,28,28]→128",
        Convolution::new(2),
        &[f32s(&[4, 256, 28, 28]), f32s(&[128, 256, 1, 1])],
        Rate::Flops(2.0 * 4.0 * 256.0 * 128.0 * 784.0),
    );
    for (name, c, hw, m, k, s, p) in [
        ("r50 3x3 64→64 56", 64, 56, 64, 3, 1, 1),
        ("r50 1x1 256→64 56", 256, 56, 64, 1, 1, 0),
        ("r50 1x1 64→256 56", 64, 56, 256, 1, 1, 0),
        ("r50 3x3 512→512 7", 512, 7, 512, 3, 1, 1),
        ("r50 1x1 1024→256 14", 1024, 14, 256, 1, 1, 0),
        ("r50 3x3 256→256 14", 256, 14, 256, 3, 1, 1),
        ("r50 3x3 128→128 28", 128, 28, 128, 3, 1, 1),
        ("r50 1x1 512→128 28", 512, 28, 128, 1, 1, 0),
        ("r50 1x1 2048→512 7", 2048, 7, 512, 1, 1, 0),
        ("r50 1x1 512→2048 7", 512, 7, 2048, 1, 1, 0),
        ("dn121 3x3 128→32 28", 128, 28, 32, 3, 1, 1),
        ("dn121 1x1 512→128 14", 512, 14, 128, 1, 1, 0),
        ("sqz 3x3 16→64 55", 16, 55, 64, 3, 1, 1),
        ("sqz 1x1 128→16 55", 128, 55, 16, 1, 1, 0),
        ("sqz 3x3 64→256 13", 64, 13, 256, 3, 1, 1),
        ("r50 7x7/2 3→64 224", 3, 224, 64, 7, 2, 3),
        ("vgg 3x3 64→64 224", 64, 224, 64, 3, 1, 1),
        ("vgg 3x3 256→256 56", 256, 56, 256, 3, 1, 1),
        ("vgg 3x3 512→512 14", 512, 14, 512, 3, 1, 1),
        ("alex 11x11/4 3→96 224", 3, 224, 96, 11, 4, 2),
        ("alex 5x5 96→256 27", 96, 27, 256, 5, 1, 2),
    ] {
        let mut layer = Convolution::new(2);
        layer.strides = vec![s as i64; 2];
        layer.pads_begin = vec![p as i64; 2];
        layer.pads_end = vec![p as i64; 2];
        let o = (hw + 2 * p - k) / s + 1;
        bench(
            b,
            &format!("conv {name}"),
            layer,
            &[f32s(&[1, c, hw, hw]), f32s(&[m, c, k, k]), f32s(&[m])],
            Rate::Flops(2.0 * (m * c * k * k * o * o) as f64),
        );
    }
    let mut depthwise = conv.clone();
    depthwise.groups = 128;
    bench(
        b,
        "depthwise3x3 f32 [4,128,56,56]",
        depthwise,
        &[f32s(&[4, 128, 56, 56]), f32s(&[128, 1, 3, 3])],
        Rate::Flops(2.0 * 4.0 * 128.0 * 9.0 * 56.0 * 56.0),
    );

    let n = 1 << 22;
    bench(
        b,
        "add f32 4M same shape",
        Elementwise::new(ElementwiseOp::Add),
        &[f32s(&[n]), f32s(&[n])],
        mb(n, 12),
    );
    bench(
        b,
        "add f32 [2048,2048]+[2048,1]",
        Elementwise::new(ElementwiseOp::Add),
        &[f32s(&[2048, 2048]), f32s(&[2048, 1])],
        mb(n, 8),
    );
    bench(
        b,
        "mul f16 4M by scalar",
        Elementwise::new(ElementwiseOp::Mul),
        &[filled(DType::F16, &[n]), filled(DType::F16, &[])],
        mb(n, 4),
    );
    bench(
        b,
        "exp f32 4M",
        Unary { op: UnaryOp::Exp },
        &[f32s(&[n])],
        mb(n, 8),
    );
    bench(
        b,
        "gelu(erf) f32 4M",
        Activation {
            kind: ActivationKind::Gelu { tanh: false },
        },
        &[f32s(&[n])],
        mb(n, 8),
    );
    bench(
        b,
        "relu f32 4M",
        Activation {
            kind: ActivationKind::Relu,
        },
        &[f32s(&[n])],
        mb(n, 8),
    );
    bench(
        b,
        "softmax f32 [2048,2048] last axis",
        Softmax {
            axis: -1,
            log: false,
        },
        &[f32s(&[2048, 2048])],
        mb(n, 8),
    );
    bench(
        b,
        "softmax f32 [2048,2048] axis 0",
        Softmax {
            axis: 0,
            log: false,
        },
        &[f32s(&[2048, 2048])],
        mb(n, 8),
    );
    bench(
        b,
        "reduce sum f32 [2048,2048] last axis",
        Reduce {
            op: ReduceOp::Sum,
            axes: vec![1],
            keep_dims: false,
        },
        &[f32s(&[2048, 2048])],
        mb(n, 4),
    );
    bench(
        b,
        "reduce sum f32 [2048,2048] axis 0",
        Reduce {
            op: ReduceOp::Sum,
            axes: vec![0],
            keep_dims: false,
        },
        &[f32s(&[2048, 2048])],
        mb(n, 4),
    );
    bench(
        b,
        "transpose f32 [2048,2048]",
        Transpose { perm: vec![1, 0] },
        &[f32s(&[2048, 2048])],
        mb(n, 8),
    );
    bench(
        b,
        "transpose f32 [16,64,64,64] nchw→nhwc",
        Transpose {
            perm: vec![0, 2, 3, 1],
        },
        &[f32s(&[16, 64, 64, 64])],
        mb(n, 8),
    );
    let mut pool = Pooling::new(PoolKind::Max, vec![3, 3]);
    pool.strides = vec![2, 2];
    pool.pads_begin = vec![1, 1];
    pool.pads_end = vec![1, 1];
    bench(
        b,
        "maxpool3x3/2 f32 [4,64,112,112]",
        pool,
        &[f32s(&[4, 64, 112, 112])],
        mb(4 * 64 * 112 * 112, 5),
    );
    bench(
        b,
        "cast f32→f16 4M",
        Cast { to: DType::F16 },
        &[f32s(&[n])],
        mb(n, 6),
    );
    bench(
        b,
        "cast f32→i32 4M",
        Cast { to: DType::I32 },
        &[f32s(&[n])],
        mb(n, 8),
    );
    bench(
        b,
        "concat f32 2×[1024,2048] axis 1",
        Concat { axis: 1 },
        &[f32s(&[1024, 2048]), f32s(&[1024, 2048])],
        mb(n, 8),
    );
}
