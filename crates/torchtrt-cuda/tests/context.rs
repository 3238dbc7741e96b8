//! The device-resident execution context: a CUDA engine of core layers and plugin layers
//! (conv → relu → Interpolate → shape-tensor Reshape → GELU) runs with its activations on
//! the device and matches the CPU engine on random data: f32 and f16, dynamic batch, on
//! host tensors and on caller-owned device buffers with a caller stream, with a user's
//! CPU-only plugin on the host in between. Skips without a GPU.

mod common;

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use common::scale::ScaleCreator;
use common::{device_or_skip, from_bytes, random_f32};
use torchtrt_core::layers::{
    Activation, ActivationKind, Concat, Convolution, Elementwise, ElementwiseOp, Gather, Reshape,
    Shape, Slice, Unsqueeze,
};
use torchtrt_core::plugin_api::{DType, DeviceKind, FieldCollection, PluginKey};
use torchtrt_core::registry::registry;
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, Error, ExecutionContext, IoBuffer, NetworkDefinition,
    OnDuplicate, Placement, Tensor, build,
};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::{CudaBackend, CudaDevice, DeviceBuffer, Stream};

/// Tests that count graph captures run alone: a device-wide synchronisation in another test
/// (a plugin's first table upload, say) invalidates a capture in flight.
static GPU: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    GPU.read().unwrap_or_else(|p| p.into_inner())
}

fn exclusive() -> RwLockWriteGuard<'static, ()> {
    GPU.write().unwrap_or_else(|p| p.into_inner())
}

fn network(with_host_plugin: bool) -> NetworkDefinition {
    torchtrt_plugins::init(registry()).expect("plugins register");
    registry()
        .register(Arc::new(ScaleCreator), "tests", OnDuplicate::Skip)
        .expect("Scale registers");
    let reg = registry();
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[
                Dim::dynamic("batch", 1, 2, 4),
                4.into(),
                12.into(),
                12.into(),
            ],
        )
        .expect("input");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[8, 4, 3, 3], random_f32(8 * 4 * 9, 1)).expect("w"),
        )
        .expect("w");
    let b = net
        .add_constant("b", Tensor::from_vec(&[8], random_f32(8, 2)).expect("b"))
        .expect("b");
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    let c = net.add_layer("conv", conv, &[x, w, b]).expect("conv")[0];
    let r = net
        .add_layer(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[c],
        )
        .expect("relu")[0];
    let up = FieldCollection::new()
        .with("mode", "bilinear")
        .with("scales", vec![2.0f64, 2.0])
        .with("use_scales", 1i32);
    let u = net
        .add_plugin(
            "up",
            reg,
            &PluginKey::new("torch_tensorrt", "Interpolate", "1"),
            &up,
            &[r],
        )
        .expect("up")[0];
    let n = net
        .add_layer(
            "batch",
            Shape {
                start: 0,
                end: Some(1),
            },
            &[x],
        )
        .expect("shape")[0];
    let tail = net
        .add_constant(
            "tail",
            Tensor::from_vec(&[2], vec![8i64, -1]).expect("tail"),
        )
        .expect("tail");
    let dims = net
        .add_layer("dims", Concat { axis: 0 }, &[n, tail])
        .expect("concat")[0];
    let flat = net
        .add_layer("flat", Reshape::new(Vec::new()), &[u, dims])
        .expect("reshape")[0];
    let mut y = net
        .add_plugin(
            "gelu",
            reg,
            &PluginKey::new("", "CustomGeluPluginDynamic", "1"),
            &FieldCollection::new(),
            &[flat],
        )
        .expect("gelu")[0];
    if with_host_plugin {
        let fields = FieldCollection::new()
            .with("scale", 0.5f32)
            .with("bias", 0.25f32);
        y = net
            .add_plugin(
                "scale",
                reg,
                &PluginKey::new("test", "Scale", "1"),
                &fields,
                &[y],
            )
            .expect("scale")[0];
    }
    net.mark_output(y, "y").expect("y");
    net.mark_output(r, "features").expect("features");
    net
}

struct Engines {
    cpu: Engine,
    gpu: Engine,
    backend: Arc<CudaBackend>,
}

fn engines(with_host_plugin: bool, precision: DType) -> Engines {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let backend = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    let cuda: Arc<dyn Backend> = backend.clone();
    let net = network(with_host_plugin);
    let config = |device| BuildConfig {
        device,
        precision,
        ..BuildConfig::default()
    };
    Engines {
        cpu: build(&net, &config(DeviceKind::Cpu), std::slice::from_ref(&cpu)).expect("cpu"),
        gpu: build(&net, &config(DeviceKind::Cuda), &[cuda, cpu]).expect("cuda"),
        backend,
    }
}

fn input(batch: usize, seed: u64) -> Tensor {
    Tensor::from_vec(&[batch, 4, 12, 12], random_f32(batch * 4 * 144, seed)).expect("input")
}

fn assert_close(got: &[Tensor], want: &[Tensor], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape(), w.shape(), "output {k}");
        let tol = f64::from(tol);
        torchtrt_testing::check_tensor(g, w, torchtrt_testing::Tol::new(tol, tol))
            .unwrap_or_else(|e| panic!("output {k}: {e}"));
    }
}

#[test]
fn device_resident_run_matches_cpu_with_dynamic_batch() {
    let Some(dev) = device_or_skip() else { return };
    let _gpu = exclusive();
    let e = engines(false, DType::F32);
    let mut ctx = e.gpu.create_context().expect("context");
    assert_eq!(ctx.device(), "cuda:0");
    for (li, layer) in e.gpu.plan().layers.iter().enumerate() {
        if matches!(layer.kind, torchtrt_core::LayerKind::Plugin(_)) {
            let kernel = e.gpu.kernel(li).expect("kernel");
            assert_eq!(kernel.placement(), Placement::Device, "{}", layer.name);
        }
    }
    ctx.set_profiling(true);
    let mut cpu = e.cpu.create_context().unwrap();
    for (batch, seed) in [(2, 10), (1, 11), (4, 12), (2, 13)] {
        let x = input(batch, seed);
        let want = cpu.execute(&[&x]).expect("cpu runs");
        let got = ctx.execute(&[&x]).expect("cuda runs");
        assert_close(&got, &want, 1e-4);
    }
    let profile = ctx.profile().expect("profile");
    let plan = e.gpu.plan();
    for (li, t) in profile.iter().enumerate() {
        if !matches!(plan.layers[li].kind, torchtrt_core::LayerKind::Constant(_)) {
            assert!(t.calls >= 1, "{} was not timed", t.layer);
        }
        if t.kind == "Plugin" {
            assert!(!t.total.is_zero(), "{} took no time", t.layer);
        }
    }
    ctx.set_profiling(false);
    let x = input(4, 14);
    for graphs in [false, true] {
        ctx.set_graphs(graphs);
        for _ in 0..3 {
            ctx.execute(&[&x]).expect("a run of this shape");
        }
        let allocations = dev.allocator().driver_allocations();
        ctx.execute(&[&x]).expect("the same shape again");
        assert_eq!(
            dev.allocator().driver_allocations(),
            allocations,
            "a repeated run reuses the context's device memory (graphs {graphs})"
        );
    }
    assert_eq!(
        ctx.graph_counts(),
        (1, 3),
        "{:?}",
        ctx.last_capture_failure()
    );
    assert!(ctx.pooled_bytes() > 0);
}

#[test]
fn f16_engine_matches_cpu() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    let e = engines(false, DType::F16);
    let mut ctx = e.gpu.create_context().expect("context");
    let mut cpu = e.cpu.create_context().unwrap();
    for (batch, seed) in [(3, 20), (1, 21)] {
        let x = input(batch, seed);
        let want = cpu.execute(&[&x]).expect("cpu runs");
        let got = ctx.execute(&[&x]).expect("cuda runs");
        assert_close(&got, &want, 2e-2);
    }
}

fn upload(dev: &CudaDevice, t: &Tensor) -> DeviceBuffer {
    let buf = dev.allocator().alloc(t.bytes().len()).expect("alloc");
    dev.new_stream()
        .expect("stream")
        .upload(t.bytes(), &buf)
        .expect("upload");
    buf
}

/// An f32 tensor on the device, as `bind_input` / `bind_output` take it.
fn f32_io(buf: &DeviceBuffer, shape: &[usize]) -> IoBuffer {
    IoBuffer::device(buf.ptr(), DType::F32, shape)
}

/// Binds `inputs` and `outputs` (engine order) and queues a run on `stream`.
///
/// # Safety
/// The buffers hold their tensors until the stream is synchronised.
unsafe fn enqueue(
    ctx: &mut ExecutionContext,
    inputs: &[IoBuffer],
    outputs: &[IoBuffer],
    stream: &Stream,
) -> torchtrt_core::Result<()> {
    let engine = ctx.engine().clone();
    for (spec, b) in engine.plan().inputs.iter().zip(inputs) {
        // SAFETY: per this function's contract.
        unsafe { ctx.bind_input(&spec.name, b) }?;
    }
    for ((name, _), b) in engine.plan().outputs.iter().zip(outputs) {
        // SAFETY: per this function's contract.
        unsafe { ctx.bind_output(name, b) }?;
    }
    // SAFETY: a live stream of the device.
    unsafe { ctx.enqueue(stream.raw()) }
}

/// Device buffers for f32 outputs of the given shapes.
struct DeviceOutputs {
    shapes: Vec<Vec<usize>>,
    bufs: Vec<DeviceBuffer>,
}

impl DeviceOutputs {
    fn new(dev: &CudaDevice, shapes: &[Vec<usize>]) -> DeviceOutputs {
        let bufs = shapes
            .iter()
            .map(|s| {
                dev.allocator()
                    .alloc(s.iter().product::<usize>() * 4)
                    .expect("alloc")
            })
            .collect();
        DeviceOutputs {
            shapes: shapes.to_vec(),
            bufs,
        }
    }

    fn io(&self) -> Vec<IoBuffer> {
        self.bufs
            .iter()
            .zip(&self.shapes)
            .map(|(b, s)| f32_io(b, s))
            .collect()
    }

    fn download(&self, stream: &Stream) -> Vec<Tensor> {
        self.shapes
            .iter()
            .zip(&self.bufs)
            .map(|(s, b)| {
                let mut bytes = vec![0u8; b.len()];
                stream.download(b, &mut bytes).expect("download");
                Tensor::from_vec(s, from_bytes(&bytes)).expect("tensor")
            })
            .collect()
    }
}

#[test]
fn enqueue_runs_on_caller_buffers_and_stream() {
    let Some(dev) = device_or_skip() else { return };
    let _gpu = shared();
    let e = engines(false, DType::F32);
    let mut ctx = e.gpu.create_context().expect("context");
    let x = input(3, 30);
    let want = ctx.execute(&[&x]).expect("execute");
    let shapes = ctx
        .output_shapes(&[(DType::F32, x.shape())])
        .expect("output shapes");
    assert_eq!(shapes, vec![vec![3, 8, 576], vec![3, 8, 12, 12]]);
    let x_dev = upload(&dev, &x);
    let out = DeviceOutputs::new(&dev, &shapes);
    let inputs = [f32_io(&x_dev, x.shape())];
    let outputs = out.io();
    let stream = dev.new_stream().expect("caller stream");
    for _ in 0..2 {
        // SAFETY: the buffers hold the tensors and outlive the synchronised stream.
        unsafe { enqueue(&mut ctx, &inputs, &outputs, &stream) }.expect("enqueue");
    }
    stream.synchronize().expect("sync");
    assert_close(&out.download(&stream), &want, 1e-6);

    let mut wrong = outputs.clone();
    wrong[0].shape = vec![3, 8, 575];
    // SAFETY: as above; the call is refused before anything is written.
    let err = unsafe { enqueue(&mut ctx, &inputs, &wrong, &stream) }.expect_err("bad shape");
    assert!(matches!(err, Error::Input(_)), "{err}");
    assert!(err.to_string().contains("output `y`"), "{err}");
}

#[test]
fn cpu_only_plugin_runs_on_the_host_with_copies() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    let e = engines(true, DType::F32);
    let ctx_places = e.gpu.create_context().expect("context");
    let plan = e.gpu.plan();
    let scale = plan
        .layers
        .iter()
        .position(|l| l.name == "scale")
        .expect("scale layer");
    let kernel = e.gpu.kernel(scale).expect("kernel");
    assert_eq!(kernel.placement(), Placement::Host);
    let summary = e.gpu.summary();
    assert!(summary.layers[scale].host_fallback);
    assert!(summary.to_string().contains("[cpu, copies from/to"));
    let mut ctx = ctx_places;
    let mut cpu = e.cpu.create_context().unwrap();
    for (batch, seed) in [(2, 40), (3, 41)] {
        let x = input(batch, seed);
        let want = cpu.execute(&[&x]).expect("cpu runs");
        let got = ctx.execute(&[&x]).expect("cuda runs");
        assert_close(&got, &want, 1e-4);
        let plain = e
            .gpu
            .create_context()
            .unwrap()
            .execute(&[&x])
            .expect("a second context");
        assert_close(&plain, &want, 1e-4);
    }
    assert_eq!(e.backend.cuda_device().ordinal(), 0);
}

#[test]
fn one_context_type_runs_cpu_and_gpu_engines() {
    let Some(dev) = device_or_skip() else { return };
    let _gpu = shared();
    let e = engines(false, DType::F32);
    let mut cpu: ExecutionContext = e.cpu.create_context().expect("cpu context");
    let mut gpu: ExecutionContext = e.gpu.create_context().expect("gpu context");
    assert_eq!(
        (cpu.device().as_str(), gpu.device().as_str()),
        ("cpu", "cuda:0")
    );
    let x = input(2, 1);
    assert_close(
        &gpu.execute(&[&x]).expect("gpu"),
        &cpu.execute(&[&x]).expect("cpu"),
        1e-4,
    );
    let buf = upload(&dev, &x);
    // SAFETY: the buffer holds x; the CPU context refuses it without reading it.
    let err = unsafe { cpu.bind_input("x", &f32_io(&buf, x.shape())) }.expect_err("device");
    assert!(err.to_string().contains("runs on the CPU"), "{err}");
    let bad = Tensor::from_vec(&[5, 4, 12, 12], random_f32(5 * 4 * 144, 1)).expect("x");
    let err = gpu.execute(&[&bad]).expect_err("batch 5 is out of range");
    assert!(
        err.to_string().contains("outside the engine's range"),
        "{err}"
    );
}

#[test]
fn contexts_move_between_threads() {
    fn send<T: Send>() {}
    send::<ExecutionContext>();
    send::<IoBuffer>();
}

/// x → Reshape(x, s) → GELU, with the shape `s` an engine input: its values decide the
/// output shape, so they are read (from the device, for `enqueue`) during the run.
fn reshape_by_input() -> NetworkDefinition {
    torchtrt_plugins::init(registry()).expect("plugins register");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::dynamic("n", 1, 2, 4), 6.into()])
        .expect("x");
    let s = net.add_input("s", DType::I64, &[2.into()]).expect("s");
    let r = net
        .add_layer("reshape", Reshape::new(Vec::new()), &[x, s])
        .expect("reshape")[0];
    let y = net
        .add_plugin(
            "gelu",
            registry(),
            &PluginKey::new("", "CustomGeluPluginDynamic", "1"),
            &FieldCollection::new(),
            &[r],
        )
        .expect("gelu")[0];
    net.mark_output(y, "y").expect("y");
    net
}

/// `net` built for the GPU (CPU fallback) and for the CPU, default options.
fn gpu_and_cpu(net: &NetworkDefinition) -> (Engine, Engine) {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    let config = |device| BuildConfig {
        device,
        ..BuildConfig::default()
    };
    (
        build(net, &config(DeviceKind::Cuda), &[cuda, cpu.clone()]).expect("cuda"),
        build(net, &config(DeviceKind::Cpu), &[cpu]).expect("cpu"),
    )
}

#[test]
fn shape_inputs_on_the_device_are_read_for_inference() {
    let Some(dev) = device_or_skip() else { return };
    let _gpu = shared();
    let (gpu, cpu) = gpu_and_cpu(&reshape_by_input());
    let x = Tensor::from_vec(&[2, 6], random_f32(12, 50)).expect("x");
    let s = Tensor::from_vec(&[2], vec![4i64, 3]).expect("s");
    let want = cpu
        .create_context()
        .unwrap()
        .execute(&[&x, &s])
        .expect("cpu runs");
    assert_eq!(want[0].shape(), &[4, 3]);
    let mut ctx = gpu.create_context().expect("context");
    let err = ctx
        .output_shapes(&[(DType::F32, &[2, 6]), (DType::I64, &[2])])
        .expect_err("the shape depends on values");
    assert!(err.to_string().contains("depend on tensor values"), "{err}");
    assert_close(&ctx.execute(&[&x, &s]).expect("runs"), &want, 1e-5);

    let (x_dev, s_dev) = (upload(&dev, &x), upload(&dev, &s));
    let y_dev = dev.allocator().alloc(12 * 4).expect("alloc");
    let stream = dev.new_stream().expect("stream");
    // SAFETY: device buffers of these shapes, alive until the stream is synchronised.
    unsafe {
        enqueue(
            &mut ctx,
            &[
                IoBuffer::device(x_dev.ptr(), DType::F32, &[2, 6]),
                IoBuffer::device(s_dev.ptr(), DType::I64, &[2]),
            ],
            &[IoBuffer::device(y_dev.ptr(), DType::F32, &[4, 3])],
            &stream,
        )
    }
    .expect("enqueue");
    let mut bytes = vec![0u8; 48];
    stream.download(&y_dev, &mut bytes).expect("download");
    let got = Tensor::from_vec(&[4, 3], from_bytes(&bytes)).expect("y");
    assert_close(&[got], &want, 1e-5);
}

#[test]
fn graph_replay_matches_the_walk_on_random_inputs_and_shape_changes() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = exclusive();
    let e = engines(false, DType::F32);
    let mut graphed = e.gpu.create_context().expect("context");
    graphed.set_graphs(true);
    let mut plain = e.gpu.create_context().expect("context");
    plain.set_graphs(false);
    let mut cpu = e.cpu.create_context().unwrap();
    let runs = [
        (2, 60),
        (2, 61),
        (2, 62),
        (3, 63),
        (3, 64),
        (2, 65),
        (3, 66),
    ];
    for (batch, seed) in runs {
        let x = input(batch, seed);
        let got = graphed.execute(&[&x]).expect("graphed run");
        let walked = plain.execute(&[&x]).expect("plain run");
        assert_close(&got, &walked, 1e-6);
        assert_close(&got, &cpu.execute(&[&x]).expect("cpu runs"), 1e-4);
    }
    assert_eq!(
        graphed.graph_counts(),
        (2, 5),
        "one graph per batch size: {:?}",
        graphed.last_capture_failure()
    );
    assert_eq!(plain.graph_counts(), (0, 0));
    graphed.set_graphs(false);
    let x = input(2, 67);
    assert_close(
        &graphed.execute(&[&x]).expect("walk again"),
        &plain.execute(&[&x]).expect("plain"),
        1e-6,
    );
    assert_eq!(graphed.graph_counts(), (0, 0));
}

#[test]
fn graph_replay_reads_and_writes_changing_caller_buffers() {
    let Some(dev) = device_or_skip() else { return };
    let _gpu = exclusive();
    let e = engines(false, DType::F32);
    let mut ctx = e.gpu.create_context().expect("context");
    ctx.set_graphs(true);
    let mut cpu = e.cpu.create_context().unwrap();
    let shapes = ctx
        .output_shapes(&[(DType::F32, &[2, 4, 12, 12])])
        .expect("output shapes");
    let stream = dev.new_stream().expect("caller stream");
    for seed in 70..75 {
        let x = input(2, seed);
        let x_dev = upload(&dev, &x);
        let out = DeviceOutputs::new(&dev, &shapes);
        let inputs = [f32_io(&x_dev, x.shape())];
        let outputs = out.io();
        // SAFETY: the buffers hold the tensors and outlive the synchronised stream.
        unsafe { enqueue(&mut ctx, &inputs, &outputs, &stream) }.expect("enqueue");
        stream.synchronize().expect("sync");
        let want = cpu.execute(&[&x]).expect("cpu runs");
        assert_close(&out.download(&stream), &want, 1e-4);
        if seed == 74 {
            let mut wrong = outputs.clone();
            wrong[1].shape = vec![2, 8, 12, 11];
            // SAFETY: as above; the call is refused before anything is queued.
            let err = unsafe { enqueue(&mut ctx, &inputs, &wrong, &stream) }.expect_err("bad");
            assert!(err.to_string().contains("output `features`"), "{err}");
        }
    }
    assert_eq!(
        ctx.graph_counts(),
        (1, 4),
        "captured on the second run, replayed from it on: {:?}",
        ctx.last_capture_failure()
    );
}

#[test]
fn runs_that_cannot_be_captured_keep_the_walk() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    let e = engines(true, DType::F32);
    let mut ctx = e.gpu.create_context().expect("context");
    ctx.set_graphs(true);
    let mut cpu = e.cpu.create_context().unwrap();
    for seed in 80..84 {
        let x = input(2, seed);
        let want = cpu.execute(&[&x]).expect("cpu runs");
        assert_close(&ctx.execute(&[&x]).expect("runs"), &want, 1e-4);
    }
    assert_eq!(
        ctx.graph_counts(),
        (0, 0),
        "a host plugin reads device data"
    );
    let why = ctx.last_capture_failure().expect("a capture was tried");
    assert!(why.contains("a download cannot be recorded"), "{why}");

    let backend = CudaBackend::new(0, Arc::new(CpuBackend::new())).expect("backend");
    let cuda: Arc<dyn Backend> = Arc::new(backend);
    let host: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let config = BuildConfig {
        device: DeviceKind::Cuda,
        ..BuildConfig::default()
    };
    let gpu = build(&reshape_by_input(), &config, &[cuda, host]).expect("cuda");
    let mut ctx = gpu.create_context().expect("context");
    ctx.set_graphs(true);
    let x = Tensor::from_vec(&[2, 6], random_f32(12, 85)).expect("x");
    for dims in [[4i64, 3], [3, 4], [4, 3], [2, 6], [12, 1]] {
        let s = Tensor::from_vec(&[2], dims.to_vec()).expect("s");
        let got = ctx.execute(&[&x, &s]).expect("runs");
        let want: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        assert_eq!(got[0].shape(), want.as_slice(), "the shape input's values");
    }
    assert_eq!(ctx.graph_counts().0, 0, "shape values are read on the host");
    let why = ctx.last_capture_failure().expect("a capture was tried");
    assert!(why.contains("a download cannot be recorded"), "{why}");
}

#[test]
fn kernel_scratch_stays_with_its_context_until_dropped() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = exclusive();
    let e = engines(false, DType::F32);
    let dev = e.backend.cuda_device().clone();
    let x = input(4, 90);
    let held = dev.allocator().held_bytes();
    let mut ctx = e.gpu.create_context().expect("context");
    ctx.set_graphs(false);
    ctx.execute(&[&x]).expect("runs");
    ctx.execute(&[&x]).expect("runs");
    assert_eq!(
        dev.allocator().held_bytes(),
        held,
        "scratch freed during a run goes back to the context, not the shared cache"
    );
    drop(ctx);
    assert!(
        dev.allocator().held_bytes() > held,
        "dropping gives it back"
    );
}

#[test]
fn contexts_on_two_streams_run_concurrently() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    let e = engines(false, DType::F32);
    let inputs: Vec<Tensor> = (0..6).map(|k| input(4, 100 + k)).collect();
    let mut cpu = e.cpu.create_context().unwrap();
    let want: Vec<Vec<Tensor>> = inputs
        .iter()
        .map(|x| cpu.execute(&[x]).expect("cpu runs"))
        .collect();
    std::thread::scope(|s| {
        for t in 0..2 {
            let (gpu, inputs, want) = (&e.gpu, &inputs, &want);
            s.spawn(move || {
                let mut ctx = gpu.create_context().expect("context");
                ctx.set_graphs(t == 0);
                for round in 0..8 {
                    let k = (round + 3 * t) % inputs.len();
                    let got = ctx.execute(&[&inputs[k]]).expect("runs");
                    assert_close(&got, &want[k], 1e-4);
                }
            });
        }
    });
}

/// x → conv(3×3, pad 1) → Add(x) → Relu, optionally with the convolution's output marked as
/// an engine output too (read twice, so nothing fuses).
fn residual_block(unfused: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), 8.into(), 9.into(), 7.into()],
        )
        .expect("x");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[8, 8, 3, 3], random_f32(576, 3)).expect("w"),
        )
        .expect("w");
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    let c = net.add_layer("conv", conv, &[x, w]).expect("conv")[0];
    let sum = net
        .add_layer(
            "add",
            torchtrt_core::layers::Elementwise::new(torchtrt_core::layers::ElementwiseOp::Add),
            &[c, x],
        )
        .expect("add")[0];
    let y = net
        .add_layer(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[sum],
        )
        .expect("relu")[0];
    net.mark_output(y, "y").expect("y");
    if unfused {
        net.mark_output(c, "conv").expect("conv");
    }
    net
}

#[test]
fn residual_add_and_relu_fuse_into_the_gpu_convolution() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    for precision in [DType::F32, DType::F16] {
        let config = |device| BuildConfig {
            device,
            precision,
            ..BuildConfig::default()
        };
        let gpu = |unfused| {
            build(
                &residual_block(unfused),
                &config(DeviceKind::Cuda),
                &[cuda.clone(), cpu.clone()],
            )
            .expect("cuda")
        };
        let (fused, unfused) = (gpu(false), gpu(true));
        let kinds = |e: &Engine| -> Vec<&'static str> {
            e.plan().layers.iter().map(|l| l.kind.op().kind()).collect()
        };
        assert!(
            kinds(&fused)
                .iter()
                .all(|&k| !matches!(k, "Elementwise" | "Activation" | "Fused")),
            "{:?}",
            kinds(&fused)
        );
        let conv_inputs = |e: &Engine| {
            e.plan()
                .layers
                .iter()
                .find(|l| l.kind.op().kind() == "Convolution")
                .map(|l| l.inputs.len())
        };
        assert_eq!(
            conv_inputs(&fused),
            Some(4),
            "x, w, a zero bias, the residual"
        );
        assert!(
            conv_inputs(&unfused).is_some_and(|n| n <= 3),
            "the conv's output is read twice"
        );
        let reference = build(
            &residual_block(false),
            &config(DeviceKind::Cpu),
            std::slice::from_ref(&cpu),
        )
        .expect("cpu");
        let mut a = fused.create_context().expect("context");
        let mut b = unfused.create_context().expect("context");
        let tol = if precision == DType::F16 { 2e-2 } else { 1e-4 };
        for (n, seed) in [(2, 110), (3, 111), (2, 112)] {
            let x = Tensor::from_vec(&[n, 8, 9, 7], random_f32(n * 504, seed)).expect("x");
            let got = a.execute(&[&x]).expect("fused");
            let plain = b.execute(&[&x]).expect("unfused");
            assert_close(&got, &plain[..1], tol);
            let want = reference
                .create_context()
                .unwrap()
                .execute(&[&x])
                .expect("cpu");
            assert_close(&got, &want, tol);
        }
    }
}

/// q, k and v selections the way exported attention takes them: Gathers of one constant
/// index along the leading axis (also behind a unit dim and counting from the end), read by
/// later layers, next to Gathers the runtime cannot alias (an engine output, a middle axis).
fn constant_gathers() -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[3.into(), 2.into(), 5.into(), 8.into()])
        .expect("x");
    let index = |net: &mut NetworkDefinition, name: &str, t: Tensor| {
        net.add_constant(name, t).expect("index")
    };
    let (i1, last, i0) = (
        index(&mut net, "i1", Tensor::scalar(1i64)),
        index(&mut net, "last", Tensor::scalar(-1i64)),
        index(&mut net, "i0", Tensor::scalar(0i64)),
    );
    let mid = index(
        &mut net,
        "mid",
        Tensor::from_vec(&[1], vec![2i64]).expect("mid"),
    );
    let gather = |net: &mut NetworkDefinition, name: &str, axis: i64, ins: &[_]| {
        net.add_layer(name, Gather { axis }, ins).expect(name)[0]
    };
    let q = gather(&mut net, "q", 0, &[x, i1]);
    let v = gather(&mut net, "v", 0, &[x, last]);
    let add = Elementwise {
        op: ElementwiseOp::Add,
        fmod: false,
    };
    let sum = net.add_layer("sum", add, &[q, v]).expect("sum")[0];
    let first = gather(&mut net, "first", 0, &[x, i0]);
    let u = net
        .add_layer("unsqueeze", Unsqueeze { axes: vec![0] }, &[x])
        .expect("unsqueeze")[0];
    let behind_unit = gather(&mut net, "behind_unit", 1, &[u, last]);
    let columns = gather(&mut net, "columns", 2, &[x, mid]);
    let relu = |net: &mut NetworkDefinition, name: &str, t| {
        let kind = ActivationKind::Relu;
        net.add_layer(name, Activation { kind }, &[t]).expect(name)[0]
    };
    let (a, b) = (
        relu(&mut net, "relu_a", behind_unit),
        relu(&mut net, "relu_b", columns),
    );
    for (t, name) in [(sum, "sum"), (first, "first"), (a, "a"), (b, "b")] {
        net.mark_output(t, name).expect(name);
    }
    net
}

#[test]
fn constant_index_gathers_alias_their_input_and_match_cpu() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    selections_match_cpu(
        &constant_gathers(),
        [(60, false), (61, true), (62, true), (63, true)],
    );
}

/// `net` (one input `[3, 2, 5, 8]`) on the GPU, with and without CUDA graphs per
/// `(seed, graphs)` run, equal to the CPU engine (selections copy bits exactly).
fn selections_match_cpu(net: &NetworkDefinition, runs: [(u64, bool); 4]) {
    let (gpu, cpu) = gpu_and_cpu(net);
    let mut ctx = gpu.create_context().expect("context");
    for (seed, graphs) in runs {
        ctx.set_graphs(graphs);
        let x = Tensor::from_vec(&[3, 2, 5, 8], random_f32(240, seed)).expect("x");
        let want = cpu
            .create_context()
            .unwrap()
            .execute(&[&x])
            .expect("cpu runs");
        assert_close(&ctx.execute(&[&x]).expect("cuda runs"), &want, 0.0);
    }
}

/// q, k and v as a `Split` of a packed projection gives them: `Slice`s of one index of the
/// leading axis, read by later layers, next to slices the runtime aliases too (a range of a
/// middle axis behind single indices) and ones it must copy (every other row, a partial
/// inner range, an engine output).
fn packed_slices() -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[3.into(), 2.into(), 5.into(), 8.into()])
        .expect("x");
    let mut slice = |name: &str, starts: &[i64], ends: &[i64], axes: &[i64], steps: &[i64]| {
        let kind = Slice {
            starts: starts.to_vec(),
            ends: ends.to_vec(),
            axes: axes.to_vec(),
            steps: steps.to_vec(),
        };
        net.add_layer(name, kind, &[x]).expect(name)[0]
    };
    let q = slice("q", &[0], &[1], &[0], &[1]);
    let k = slice("k", &[1], &[2], &[0], &[1]);
    let v = slice("v", &[2], &[3], &[0], &[1]);
    let rows = slice("rows", &[2, 1, 1], &[3, 2, 4], &[0, 1, 2], &[1, 1, 1]);
    let strided = slice("strided", &[0], &[5], &[2], &[2]);
    let inner = slice("inner", &[2], &[6], &[3], &[1]);
    let out = slice("out", &[1], &[2], &[0], &[1]);
    let add = |net: &mut NetworkDefinition, name: &str, a, b| {
        let kind = Elementwise {
            op: ElementwiseOp::Add,
            fmod: false,
        };
        net.add_layer(name, kind, &[a, b]).expect(name)[0]
    };
    let qk = add(&mut net, "qk", q, k);
    let qkv = add(&mut net, "qkv", qk, v);
    let relu = |net: &mut NetworkDefinition, name: &str, t| {
        let kind = ActivationKind::Relu;
        net.add_layer(name, Activation { kind }, &[t]).expect(name)[0]
    };
    let (r, s, i) = (
        relu(&mut net, "relu_rows", rows),
        relu(&mut net, "relu_strided", strided),
        relu(&mut net, "relu_inner", inner),
    );
    for (t, name) in [(qkv, "qkv"), (r, "r"), (s, "s"), (i, "i"), (out, "out")] {
        net.mark_output(t, name).expect(name);
    }
    net
}

#[test]
fn contiguous_slices_alias_their_input_and_match_cpu() {
    if device_or_skip().is_none() {
        return;
    }
    let _gpu = shared();
    selections_match_cpu(
        &packed_slices(),
        [(70, false), (71, true), (72, true), (73, false)],
    );
}
