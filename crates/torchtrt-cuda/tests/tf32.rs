//! `BuildConfig::tf32`: an f32 MatMul or convolution built with it runs on TF32 tensor cores
//! (results differ from f32 by TF32's rounding, within its bound), the flag survives
//! serialize/deserialize, and the CPU backend ignores it.

mod common;

use std::sync::Arc;

use common::{device_or_skip, random_f32};
use torchtrt_core::layers::{Convolution, LayerKind, MatMul};
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, EngineLoader, NetworkDefinition, Tensor, build,
};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::CudaBackend;

const M: usize = 64;
const K: usize = 512;
const N: usize = 96;

/// `y = layer(x, w)` with `x` an input of `x_shape` and `w` random constant weights.
fn network(
    x_shape: &[usize],
    w_shape: &[usize],
    w_seed: u64,
    layer: impl Into<LayerKind>,
) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let dims: Vec<Dim> = x_shape.iter().map(|&d| Dim::Fixed(d as i64)).collect();
    let x = net.add_input("x", DType::F32, &dims).expect("input");
    let count = w_shape.iter().product();
    let w = Tensor::from_vec(w_shape, random_f32(count, w_seed)).expect("weights");
    let w = net.add_constant("w", w).expect("constant");
    let y = net.add("layer", layer, &[x, w]).expect("layer");
    net.mark_output(y, "y").expect("output");
    net
}

fn matmul_network() -> NetworkDefinition {
    let kind = MatMul {
        transpose_a: false,
        transpose_b: false,
    };
    network(&[M, K], &[K, N], 2, kind)
}

/// The larger of two errors, NaN winning (`f64::max` drops a NaN, which would hide a NaN
/// output; the bounds below are `<`/`>` tests a NaN fails).
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Largest error of `got` against the f64 product, in units of `Σ|a·b|` per element.
fn relative_error(got: &[f32], a: &[f32], w: &[f32]) -> f64 {
    let mut worst = 0.0f64;
    for i in 0..M {
        for j in 0..N {
            let (mut exact, mut scale) = (0.0f64, 0.0f64);
            for k in 0..K {
                let p = f64::from(a[i * K + k]) * f64::from(w[k * N + j]);
                exact += p;
                scale += p.abs();
            }
            worst = nan_max(worst, (f64::from(got[i * N + j]) - exact).abs() / scale);
        }
    }
    worst
}

/// The convolution case: [B, CI, S, S] by [CO, CI, 3, 3], padding 1.
const B: usize = 2;
const CI: usize = 64;
const CO: usize = 32;
const S: usize = 12;

fn conv_network() -> NetworkDefinition {
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    network(&[B, CI, S, S], &[CO, CI, 3, 3], 4, conv)
}

/// Largest error of the convolution's `got` against the f64 result, in units of `Σ|x·w|`.
fn conv_relative_error(got: &[f32], x: &[f32], w: &[f32]) -> f64 {
    let mut worst = 0.0f64;
    for (o, &g) in got.iter().enumerate() {
        let (b, co, oy, ox) = (o / (CO * S * S), o / (S * S) % CO, o / S % S, o % S);
        let (mut exact, mut scale) = (0.0f64, 0.0f64);
        for ci in 0..CI {
            for ky in 0..3 {
                for kx in 0..3 {
                    let (iy, ix) = ((oy + ky).wrapping_sub(1), (ox + kx).wrapping_sub(1));
                    if iy >= S || ix >= S {
                        continue;
                    }
                    let p = f64::from(x[((b * CI + ci) * S + iy) * S + ix])
                        * f64::from(w[((co * CI + ci) * 3 + ky) * 3 + kx]);
                    exact += p;
                    scale += p.abs();
                }
            }
        }
        worst = nan_max(worst, (f64::from(g) - exact).abs() / scale);
    }
    worst
}

/// The f32 build is exact to f32 rounding; the TF32 build is not, but within TF32's.
fn assert_errors(e_exact: f64, e_fast: f64) {
    assert!(e_exact < 4e-6, "f32 error {e_exact}");
    assert!(
        e_fast > 1e-5,
        "TF32 gave f32 accuracy ({e_fast}): TF32 was not used"
    );
    assert!(
        e_fast < 2f64.powi(-9),
        "TF32 error {e_fast} beyond its rounding"
    );
}

fn run_cuda(engine: &Engine, x: &Tensor) -> Vec<f32> {
    let mut ctx = engine.create_context().expect("context");
    let out = ctx.execute(&[x]).expect("runs");
    out[0].as_slice::<f32>().expect("f32").to_vec()
}

#[test]
fn tf32_matmul_rounds_like_tf32_and_round_trips() {
    if device_or_skip().is_none() {
        return;
    }
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    let config = |device, tf32| BuildConfig {
        device,
        tf32,
        ..BuildConfig::default()
    };
    let a = random_f32(M * K, 1);
    let w = random_f32(K * N, 2);
    let x = Tensor::from_vec(&[M, K], a.clone()).expect("input");
    let backends = [cuda.clone(), cpu.clone()];

    let exact = build(
        &matmul_network(),
        &config(DeviceKind::Cuda, false),
        &backends,
    )
    .expect("f32");
    let fast = build(
        &matmul_network(),
        &config(DeviceKind::Cuda, true),
        &backends,
    )
    .expect("tf32");
    let e_exact = relative_error(&run_cuda(&exact, &x), &a, &w);
    let e_fast = relative_error(&run_cuda(&fast, &x), &a, &w);
    assert_errors(e_exact, e_fast);

    let reloaded = EngineLoader::new(vec![cuda.clone()])
        .deserialize(&fast.serialize())
        .expect("deserializes");
    assert!(reloaded.plan().options.tf32);
    let e_reloaded = relative_error(&run_cuda(&reloaded, &x), &a, &w);
    assert!(
        e_reloaded > 1e-5 && e_reloaded < 2f64.powi(-9),
        "reloaded TF32 error {e_reloaded}"
    );

    let on_cpu = build(
        &matmul_network(),
        &config(DeviceKind::Cpu, true),
        std::slice::from_ref(&cpu),
    )
    .expect("cpu");
    let got = on_cpu
        .create_context()
        .unwrap()
        .execute(&[&x])
        .expect("cpu runs");
    let e_cpu = relative_error(got[0].as_slice::<f32>().expect("f32"), &a, &w);
    assert!(e_cpu < 4e-6, "the CPU must ignore TF32: error {e_cpu}");
}

#[test]
fn tf32_convolution_rounds_like_tf32() {
    if device_or_skip().is_none() {
        return;
    }
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    let backends = [cuda, cpu];
    let x = random_f32(B * CI * S * S, 3);
    let w = random_f32(CO * CI * 9, 4);
    let input = Tensor::from_vec(&[B, CI, S, S], x.clone()).expect("input");
    let error = |tf32| {
        let config = BuildConfig {
            device: DeviceKind::Cuda,
            tf32,
            ..BuildConfig::default()
        };
        let engine = build(&conv_network(), &config, &backends).expect("builds");
        conv_relative_error(&run_cuda(&engine, &input), &x, &w)
    };
    let (e_exact, e_fast) = (error(false), error(true));
    assert_errors(e_exact, e_fast);
}
