//! Repeated bound runs at the same input shapes allocate nothing: a counting global
//! allocator (every thread, the engine's worker threads included) watches bound runs of CPU
//! engines. A test binary of its own, with one test, so nothing else allocates meanwhile.
//!
//! The runtime itself (the plan walk, activations, shapes, bound I/O) allocates nothing.
//! Kernels may make small per-call tables of their own (strided-loop plans, pooling windows,
//! the convolution's im2col plan, the `gemm` library's packing buffer of its left operand,
//! one per product of few rows: its `kc × MR` floats are 32 KiB with AVX2, 128 KiB with
//! AVX-512), and rayon's job queue grows now and then; a worker that meets a kernel's largest
//! task for the first time grows its kept scratch (at most one per worker and kernel). What a
//! layer's call keeps (a padded image) is kept once for the process, whichever worker runs
//! the call. Apart from that packing buffer, nothing of an activation's size (here at least
//! 48 KiB) is allocated.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use torchtrt::layers::{
    Activation, ActivationKind, Concat, Convolution, Elementwise, ElementwiseOp, Gather, MatMul,
    PoolKind, Pooling, Reshape, Shape, Softmax, Transpose,
};
use torchtrt::plugin_api::DType;
use torchtrt::{BuildConfig, Dim, Engine, NetworkDefinition, Tensor};

struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn note(size: usize) {
    if ON.load(Ordering::Relaxed) {
        COUNT.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations (count, bytes, largest) during `f`.
fn counted(f: impl FnOnce()) -> (u64, u64, usize) {
    COUNT.store(0, Ordering::SeqCst);
    BYTES.store(0, Ordering::SeqCst);
    LARGEST.store(0, Ordering::SeqCst);
    ON.store(true, Ordering::SeqCst);
    f();
    ON.store(false, Ordering::SeqCst);
    (
        COUNT.load(Ordering::SeqCst),
        BYTES.load(Ordering::SeqCst),
        LARGEST.load(Ordering::SeqCst),
    )
}

fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    torchtrt_testing::uniform(n, seed, -2.0, 2.0)
}

/// [n, c·h·w] from `t` ([n, c, h, w]) through shape arithmetic (Shape, Gather, Concat,
/// Reshape), as exported models flatten.
fn flatten(net: &mut NetworkDefinition, t: torchtrt::TensorId) -> torchtrt::TensorId {
    let shape = net
        .add_layer(
            "shape",
            Shape {
                start: 0,
                end: None,
            },
            &[t],
        )
        .unwrap()[0];
    let zero = net
        .add_constant("zero", Tensor::from_vec(&[1], vec![0i64]).unwrap())
        .unwrap();
    let n = net
        .add_layer("n", Gather { axis: 0 }, &[shape, zero])
        .unwrap()[0];
    let rest = net
        .add_constant("rest", Tensor::from_vec(&[1], vec![-1i64]).unwrap())
        .unwrap();
    let dims = net
        .add_layer("dims", Concat { axis: 0 }, &[n, rest])
        .unwrap()[0];
    net.add_layer("flat", Reshape::new(Vec::new()), &[t, dims])
        .unwrap()[0]
}

fn input(net: &mut NetworkDefinition) -> torchtrt::TensorId {
    net.add_input(
        "x",
        DType::F32,
        &[Dim::dynamic("n", 1, 2, 4), 3.into(), 64.into(), 64.into()],
    )
    .unwrap()
}

/// max pool → + bias → relu → transpose → flatten by shape arithmetic → softmax, with a
/// dynamic batch: layers whose kernels keep no tables.
fn plain_engine() -> Engine {
    let mut net = NetworkDefinition::new();
    let x = input(&mut net);
    let p = net
        .add_layer("pool", Pooling::new(PoolKind::Max, vec![2, 2]), &[x])
        .unwrap()[0];
    let bias = net
        .add_constant(
            "bias",
            Tensor::from_vec(&[1, 3, 1, 1], random_f32(3, 1)).unwrap(),
        )
        .unwrap();
    let add = Elementwise::new(ElementwiseOp::Add);
    let b = net.add_layer("add", add, &[p, bias]).unwrap()[0];
    let kind = ActivationKind::Relu;
    let r = net.add_layer("relu", Activation { kind }, &[b]).unwrap()[0];
    let perm = vec![0, 2, 3, 1];
    let t = net
        .add_layer("transpose", Transpose { perm }, &[r])
        .unwrap()[0];
    let flat = flatten(&mut net, t);
    let y = net
        .add_layer(
            "softmax",
            Softmax {
                axis: -1,
                log: false,
            },
            &[flat],
        )
        .unwrap()[0];
    net.mark_output(y, "y").unwrap();
    torchtrt::compile(&net, &BuildConfig::default()).unwrap()
}

/// conv → relu → flatten by shape arithmetic → matmul → softmax, with a dynamic batch.
fn gemm_engine() -> Engine {
    let mut net = NetworkDefinition::new();
    let x = input(&mut net);
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[8, 3, 3, 3], random_f32(216, 1)).unwrap(),
        )
        .unwrap();
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    let c = net.add_layer("conv", conv, &[x, w]).unwrap()[0];
    let kind = ActivationKind::Relu;
    let r = net.add_layer("relu", Activation { kind }, &[c]).unwrap()[0];
    let flat = flatten(&mut net, r);
    let m = net
        .add_constant(
            "m",
            Tensor::from_vec(&[32768, 10], random_f32(327_680, 2)).unwrap(),
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
    torchtrt::compile(&net, &BuildConfig::default()).unwrap()
}

/// The demo model: a convolution and the seed plugins (Interpolate twice, instance norm,
/// GELU, normalize).
fn demo_engine() -> Engine {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/demo/demo.onnx");
    let net = torchtrt::import_onnx(path, Default::default()).unwrap();
    torchtrt::compile(&net, &BuildConfig::default()).unwrap()
}

/// Allocations over 20 bound runs after 3 warm-up runs, and the outputs of the last run.
/// Runs before counting: enough for every worker's kept scratch to reach its size under the
/// splits work stealing makes.
const WARM_UP: usize = 30;

fn bound_runs(engine: &Engine, x: &Tensor) -> ((u64, u64, usize), Tensor) {
    let mut ctx = engine.create_context().unwrap();
    let name = engine.plan().inputs[0].name.clone();
    ctx.bind_owned(&[(&name, x)]).unwrap();
    for _ in 0..WARM_UP {
        ctx.execute_bound().unwrap();
    }
    let counts = counted(|| {
        for _ in 0..20 {
            ctx.execute_bound().unwrap();
        }
    });
    let out = &engine.plan().outputs[0].0;
    (counts, ctx.read_output(out).unwrap())
}

/// Allocations of 20 bound runs of `engine` on `x`, after checking the bound runs compute
/// what `execute` does.
fn checked_runs(engine: &Engine, x: &Tensor) -> (u64, u64, usize) {
    let want = engine.create_context().unwrap().execute(&[x]).unwrap();
    let (counts, got) = bound_runs(engine, x);
    assert_eq!(got, want[0], "bound runs compute what execute does");
    println!(
        "20 bound runs: {} allocations, {} bytes, the largest {} bytes",
        counts.0, counts.1, counts.2
    );
    counts
}

/// Runs `f` on worker `index` of rayon's pool, where the engine's runs then start in place.
fn on_worker(index: usize, f: impl FnOnce() + Send) {
    let f = Mutex::new(Some(f));
    rayon::broadcast(|worker| {
        if worker.index() == index
            && let Some(f) = f.lock().unwrap().take()
        {
            f()
        }
    });
}

/// Allocations of 20 bound runs started on worker 1 after the warm-up runs all started on
/// worker 0: buffers a layer's call keeps (the padded image of a small convolution) do not
/// depend on which worker work stealing hands the call.
fn runs_moved_to_another_worker(engine: &Engine, x: &Tensor) -> (u64, u64, usize) {
    let mut ctx = engine.create_context().unwrap();
    let name = engine.plan().inputs[0].name.clone();
    ctx.bind_owned(&[(&name, x)]).unwrap();
    on_worker(0, || {
        for _ in 0..WARM_UP {
            ctx.execute_bound().unwrap();
        }
    });
    let counts = counted(|| {
        on_worker(1, || {
            for _ in 0..20 {
                ctx.execute_bound().unwrap();
            }
        })
    });
    println!(
        "20 bound runs on another worker: {} allocations, {} bytes, the largest {} bytes",
        counts.0, counts.1, counts.2
    );
    counts
}

#[test]
fn repeated_bound_runs_allocate_nothing() {
    // Two workers, whatever the machine: kernels split over several threads (reductions,
    // softmax, pooling) keep their per-task scratch per thread between runs.
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build_global()
        .expect("the only thread pool of this test binary");
    let x = Tensor::from_vec(&[4, 3, 64, 64], random_f32(49_152, 3)).unwrap();
    let (count, bytes, largest) = runs_moved_to_another_worker(&gemm_engine(), &x);
    assert!(
        largest <= 128 << 10 && bytes <= 20 * (192 << 10),
        "20 bound runs of a convolution and a matmul on a worker that ran none before \
         allocated {count} times, {bytes} bytes, the largest {largest} bytes"
    );

    let (count, bytes, largest) = checked_runs(&plain_engine(), &x);
    assert!(
        largest <= 32 << 10 && bytes <= 20 * (16 << 10),
        "20 bound runs of pooling, element-wise, transpose, shape arithmetic and softmax \
         allocated {count} times, {bytes} bytes, the largest {largest} bytes"
    );

    let (count, bytes, largest) = checked_runs(&gemm_engine(), &x);
    assert!(
        largest <= 128 << 10 && bytes <= 20 * (192 << 10),
        "20 bound runs of a convolution and a matmul allocated {count} times, {bytes} bytes, \
         the largest {largest} bytes: more than the kernels' own tables"
    );

    let x = Tensor::from_vec(&[1, 3, 16, 16], random_f32(768, 4)).unwrap();
    let (count, bytes, largest) = checked_runs(&demo_engine(), &x);
    assert!(
        largest <= 32 << 10 && bytes <= 20 * (128 << 10),
        "20 bound runs of the demo model allocated {count} times, {bytes} bytes, the largest \
         {largest} bytes: more than the kernels' own tables"
    );

    let x = Tensor::from_vec(&[4, 3, 64, 64], random_f32(49_152, 5)).unwrap();
    let engine = plain_engine();
    let mut ctx = engine.create_context().unwrap();
    ctx.execute(&[&x]).unwrap();
    let (_, _, largest) = counted(|| {
        ctx.execute(&[&x]).unwrap();
    });
    assert!(
        largest >= 48 << 10,
        "execute returns a new output, which the counter sees ({largest} bytes)"
    );
}
