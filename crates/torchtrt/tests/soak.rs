//! Soak: one engine run from 8 threads × 1,000 bound runs each (every thread its own
//! context, input and batch size). On the CPU every run's output must equal, bit for bit,
//! what a single-threaded run of the same input gave; on a GPU (where one is present) the
//! same engine compiled for `cuda` must stay within f32 rounding of the CPU's output in
//! every run. Every run writes its whole output (the bound buffer is reset to a NaN
//! sentinel before each run).

mod common;

use std::sync::Arc;

use common::random_f32;

use torchtrt::layers::{Activation, ActivationKind, Convolution, MatMul, Reshape, Softmax};
use torchtrt::plugin_api::DType;
use torchtrt::{BuildConfig, Dim, Engine, IoBuffer, NetworkDefinition, Tensor};

const THREADS: usize = 8;
const RUNS: usize = 1000;

/// x[n∈1..4, 3, 8, 8] → conv 3×3 (4 channels) → relu → reshape [n, 256] → matmul [256, 5]
/// → softmax, compiled for `device`.
fn engine(device: &str) -> Engine {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), 3.into(), 8.into(), 8.into()],
        )
        .unwrap();
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[4, 3, 3, 3], random_f32(108, 1)).unwrap(),
        )
        .unwrap();
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    let c = net.add_layer("conv", conv, &[x, w]).unwrap()[0];
    let kind = ActivationKind::Relu;
    let r = net.add_layer("relu", Activation { kind }, &[c]).unwrap()[0];
    let shape = net
        .add_constant("shape", Tensor::from_vec(&[2], vec![0i64, 256]).unwrap())
        .unwrap();
    let flat = net
        .add_layer("flat", Reshape::new(Vec::new()), &[r, shape])
        .unwrap()[0];
    let m = net
        .add_constant(
            "m",
            Tensor::from_vec(&[256, 5], random_f32(1280, 2)).unwrap(),
        )
        .unwrap();
    let logits = net.add_layer("fc", MatMul::default(), &[flat, m]).unwrap()[0];
    let y = net
        .add_layer(
            "softmax",
            Softmax {
                axis: -1,
                log: false,
            },
            &[logits],
        )
        .unwrap()[0];
    net.mark_output(y, "y").unwrap();
    torchtrt::compile_for(&net, &BuildConfig::default(), device).unwrap()
}

/// Per thread: its batch size, input and the single-threaded CPU output for it.
fn cases(cpu: &Engine) -> Vec<(usize, Vec<f32>, Vec<f32>)> {
    (0..THREADS)
        .map(|t| {
            let n = 1 + t % 4;
            let x = random_f32(n * 3 * 64, 100 + t as u64);
            let input = Tensor::from_vec(&[n, 3, 8, 8], x.clone()).unwrap();
            let want = cpu.create_context().unwrap().execute(&[&input]).unwrap();
            let want = want[0].as_slice::<f32>().unwrap().to_vec();
            assert_eq!(want.len(), n * 5);
            for row in want.chunks(5) {
                let sum: f32 = row.iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "softmax row sums to {sum}");
            }
            (n, x, want)
        })
        .collect()
}

/// Runs `engine` from [`THREADS`] threads, [`RUNS`] bound runs each, every output checked
/// by `same(got, want)`.
fn soak(engine: Engine, cases: &[(usize, Vec<f32>, Vec<f32>)], same: fn(f32, f32) -> bool) {
    let engine = Arc::new(engine);
    std::thread::scope(|scope| {
        for (t, (n, x, want)) in cases.iter().enumerate() {
            let engine = engine.clone();
            scope.spawn(move || {
                let mut ctx = engine.create_context().unwrap();
                let mut input = x.clone();
                let mut out = vec![f32::NAN; n * 5];
                let in_buf = IoBuffer::host(input.as_mut_ptr().cast(), DType::F32, &[*n, 3, 8, 8]);
                let out_buf = IoBuffer::host(out.as_mut_ptr().cast(), DType::F32, &[*n, 5]);
                // SAFETY: both buffers live, untouched by anyone else, until the context is
                // dropped at the end of this closure; `out` is reset between runs only.
                unsafe {
                    ctx.bind_input("x", &in_buf).unwrap();
                    ctx.bind_output("y", &out_buf).unwrap();
                }
                for run in 0..RUNS {
                    // SAFETY: no run is in progress; the buffer stays bound in place.
                    unsafe { std::ptr::write_bytes(out_buf.ptr as *mut f32, 0xff, n * 5) };
                    ctx.execute_bound().unwrap();
                    // SAFETY: the run has finished; `out_buf` points at `n * 5` floats.
                    let got =
                        unsafe { std::slice::from_raw_parts(out_buf.ptr as *const f32, n * 5) };
                    let ok = got.iter().zip(want).all(|(&a, &b)| same(a, b));
                    assert!(ok, "thread {t}, run {run}: {got:?} != {want:?}");
                }
                drop(ctx);
            });
        }
    });
}

#[test]
fn eight_threads_a_thousand_bound_runs_each_give_identical_outputs() {
    let cpu = engine("cpu");
    let cases = cases(&cpu);
    soak(cpu, &cases, |a, b| a.to_bits() == b.to_bits());
}

#[test]
fn on_a_gpu_eight_threads_a_thousand_bound_runs_each_match_the_cpu() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let cases = cases(&engine("cpu"));
    soak(engine("cuda"), &cases, |a, b| {
        (a - b).abs() <= 1e-6 + 1e-5 * b.abs()
    });
}
