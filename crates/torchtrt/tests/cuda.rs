//! The facade's CUDA entry points: `backend_for` / `compile_for` / `cuda_context`. Without a
//! GPU, asking for one is a clear "no CUDA device" error; with one, a network of core and
//! plugin layers compiles for `cuda:0`, stores its compiled programs (the plugins' included),
//! reloads through `Runtime`, and its device-resident context matches the CPU engine.

mod common;

use common::{assert_close, random_f32};
use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, Tensor, layers};

fn network() -> NetworkDefinition {
    torchtrt::init_plugins().expect("plugins");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), 3.into(), 10.into(), 10.into()],
        )
        .expect("x");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[5, 3, 3, 3], random_f32(135, 1)).expect("w"),
        )
        .expect("w");
    let c = net
        .add_layer("conv", layers::Convolution::new(2), &[x, w])
        .expect("conv")[0];
    let up = FieldCollection::new()
        .with("mode", "bilinear")
        .with("scales", vec![2.0f64, 2.0])
        .with("use_scales", 1i32);
    let u = net
        .add_plugin(
            "up",
            torchtrt::registry(),
            &PluginKey::new("torch_tensorrt", "Interpolate", "1"),
            &up,
            &[c],
        )
        .expect("up")[0];
    net.mark_output(u, "y").expect("y");
    net
}

#[test]
fn device_names_are_checked() {
    assert!(torchtrt::backend_for("cpu").is_ok());
    for bad in ["gpu", "cuda:", "cuda:-1", "CUDA"] {
        let err = torchtrt::backend_for(bad)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("is not `cpu`, `cuda` or `cuda:N`"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn cuda_without_a_gpu_is_a_clear_error() {
    if torchtrt::cuda::probe::available() {
        println!("skipped: a CUDA device is present");
        return;
    }
    let err = torchtrt::backend_for("cuda")
        .err()
        .expect("no GPU")
        .to_string();
    assert!(err.contains("no CUDA device"), "{err}");
    let err = torchtrt::compile_for(&network(), &BuildConfig::default(), "cuda:0")
        .err()
        .expect("no GPU")
        .to_string();
    assert!(err.contains("no CUDA device"), "{err}");
    let cpu = torchtrt::compile(&network(), &BuildConfig::default()).expect("cpu engine");
    assert_eq!(cpu.create_context().expect("context").device(), "cpu");
}

#[test]
fn compile_for_cuda_stores_programs_and_runs_device_resident() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let net = network();
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), "cuda").expect("compiles");
    let blobs: Vec<String> = engine.blobs().into_iter().map(|b| b.name).collect();
    assert!(
        blobs
            .iter()
            .any(|b| b.starts_with("cuda/plugins/interpolate-")),
        "the plugin's program is stored: {blobs:?}"
    );
    let reloaded = torchtrt::Runtime::new()
        .expect("runtime")
        .deserialize(&engine.serialize())
        .expect("reloads");
    let cpu = torchtrt::compile_for(&net, &BuildConfig::default(), "cpu").expect("cpu");
    let x = Tensor::from_vec(&[3, 3, 10, 10], random_f32(900, 2)).expect("x");
    let want = cpu
        .create_context()
        .unwrap()
        .execute(&[&x])
        .expect("cpu runs");
    let mut ctx = reloaded.create_context().expect("context");
    assert_eq!(ctx.device(), "cuda:0");
    let got = ctx.execute(&[&x]).expect("cuda runs");
    assert_eq!(got[0].shape(), want[0].shape());
    assert_close(
        got[0].as_slice::<f32>().expect("f32"),
        want[0].as_slice::<f32>().expect("f32"),
        1e-5,
        1e-4,
    );
}

/// `Interpolate` sized by a shape input: `sizes` from another input's shape (computed on
/// the host), and `scales` given at run time. One CUDA engine runs at several sizes and
/// matches the CPU engine.
#[test]
fn shape_inputs_size_a_cuda_plugin_at_run_time() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    torchtrt::init_plugins().expect("plugins");
    let key = PluginKey::new("torch_tensorrt", "Interpolate", "1");
    let mut net = NetworkDefinition::new();
    let dims = |p: &str| {
        vec![
            Dim::dynamic(&format!("{p}n"), 1, 2, 4),
            3.into(),
            Dim::dynamic(&format!("{p}h"), 2, 8, 32),
            Dim::dynamic(&format!("{p}w"), 2, 8, 32),
        ]
    };
    let x = net.add_input("x", DType::F32, &dims("x")).expect("x");
    let y = net.add_input("y", DType::F32, &dims("y")).expect("y");
    let scales = net
        .add_input("scales", DType::F32, &[2.into()])
        .expect("scales");
    let sizes = net
        .add_layer(
            "sizes",
            layers::Shape {
                start: 2,
                end: None,
            },
            &[y],
        )
        .expect("sizes")[0];
    let by_sizes = FieldCollection::new()
        .with("mode", "bilinear")
        .with("size_input", "sizes");
    let a = net
        .add_plugin(
            "by_sizes",
            torchtrt::registry(),
            &key,
            &by_sizes,
            &[x, sizes],
        )
        .expect("by_sizes")[0];
    let by_scales = FieldCollection::new()
        .with("mode", "nearest")
        .with("size_input", "scales")
        .with("coordinate_transformation_mode", "asymmetric")
        .with("nearest_mode", "floor");
    let b = net
        .add_plugin(
            "by_scales",
            torchtrt::registry(),
            &key,
            &by_scales,
            &[x, scales],
        )
        .expect("by_scales")[0];
    net.mark_output(a, "a").expect("a");
    net.mark_output(b, "b").expect("b");
    let gpu = torchtrt::compile_for(&net, &BuildConfig::default(), "cuda").expect("compiles");
    let cpu = torchtrt::compile_for(&net, &BuildConfig::default(), "cpu").expect("cpu");
    let mut gctx = gpu.create_context().expect("context");
    let mut cctx = cpu.create_context().expect("context");
    for (seed, ([n, h, w], [hh, ww], s)) in [
        ([2, 8, 8], [16, 12], [2.0f32, 0.5]),
        ([1, 5, 7], [3, 20], [1.5, 3.0]),
        ([3, 16, 4], [8, 8], [0.25, 2.0]),
    ]
    .into_iter()
    .enumerate()
    {
        let seed = seed as u64;
        let xt = Tensor::from_vec(&[n, 3, h, w], random_f32(n * 3 * h * w, seed)).expect("x");
        let yt =
            Tensor::from_vec(&[n, 3, hh, ww], random_f32(n * 3 * hh * ww, seed + 9)).expect("y");
        let st = Tensor::from_vec(&[2], s.to_vec()).expect("scales");
        let want = cctx.execute(&[&xt, &yt, &st]).expect("cpu runs");
        let got = gctx.execute(&[&xt, &yt, &st]).expect("cuda runs");
        assert_eq!(got[0].shape(), [n, 3, hh, ww]);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape(), w.shape());
            assert_close(
                g.as_slice::<f32>().expect("f32"),
                w.as_slice::<f32>().expect("f32"),
                1e-5,
                1e-4,
            );
        }
    }
}

/// Layers the CUDA kernels do not instantiate (an Attention that also outputs its score
/// matrix, arithmetic on u32) run on the host of a CUDA engine, and match the CPU engine.
#[test]
fn layers_without_device_kernels_run_on_the_host_of_a_cuda_engine() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2.into(), 3.into(), 5.into(), 8.into()])
        .expect("x");
    let u = net.add_input("u", DType::U32, &[6.into()]).expect("u");
    let attention = layers::Attention {
        causal: true,
        scores: Some(layers::ScoreStage::Weights),
        ..layers::Attention::default()
    };
    let outs = net
        .add_layer("attention", attention, &[x, x, x])
        .expect("attention");
    let sum = layers::Elementwise::new(layers::ElementwiseOp::Add);
    let u2 = net.add_layer("sum", sum, &[u, u]).expect("sum")[0];
    net.mark_output(outs[0], "y").expect("y");
    net.mark_output(outs[1], "scores").expect("scores");
    net.mark_output(u2, "u2").expect("u2");
    let x = Tensor::from_vec(&[2, 3, 5, 8], random_f32(240, 3)).expect("x");
    let u = Tensor::from_vec(&[6], vec![1u32, 7, 1 << 31, u32::MAX, 40, 0]).expect("u");
    let run = |device: &str| {
        let engine =
            torchtrt::compile_for(&net, &BuildConfig::default(), device).expect("compiles");
        let mut ctx = engine.create_context().expect("context");
        ctx.execute(&[&x, &u]).expect("runs")
    };
    let (want, got) = (run("cpu"), run("cuda"));
    for k in 0..2 {
        assert_eq!(got[k].shape(), want[k].shape());
        assert_close(
            got[k].as_slice::<f32>().expect("f32"),
            want[k].as_slice::<f32>().expect("f32"),
            1e-6,
            1e-5,
        );
    }
    assert_eq!(
        got[2].as_slice::<u32>().expect("u32"),
        &[2, 14, 0, u32::MAX - 1, 80, 0]
    );
}

/// `x·W + b + Reshape(x', Shape(x'))` over `[batch, seq, 8]`: on CUDA the sum rides on the
/// product as its residual, whose shape only the builder's shape arithmetic knows to be the
/// product's (the dynamo exports of BERT, T5 and ViT write their residuals so). The engine
/// builds, reloads and matches the CPU's.
#[test]
fn a_cuda_product_takes_a_residual_known_by_shape_arithmetic() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let mut net = NetworkDefinition::new();
    let dims = [
        Dim::dynamic("batch", 1, 2, 4),
        Dim::dynamic("seq", 1, 5, 9),
        8.into(),
    ];
    let x = net.add_input("x", DType::F32, &dims).expect("x");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[8, 8], random_f32(64, 31)).expect("w"),
        )
        .expect("w");
    let b = net
        .add_constant("b", Tensor::from_vec(&[8], random_f32(8, 32)).expect("b"))
        .expect("b");
    let m = net
        .add_layer("mm", layers::MatMul::default(), &[x, w])
        .expect("mm")[0];
    let add = || layers::Elementwise::new(layers::ElementwiseOp::Add);
    let m = net.add_layer("bias", add(), &[m, b]).expect("bias")[0];
    let g = net
        .add_layer(
            "sin",
            layers::Unary {
                op: layers::UnaryOp::Sin,
            },
            &[x],
        )
        .expect("sin")[0];
    let shape = net
        .add_layer("shape", layers::Shape::default(), &[g])
        .expect("shape")[0];
    let r = net
        .add_layer("view", layers::Reshape::default(), &[g, shape])
        .expect("view")[0];
    let y = net.add_layer("sum", add(), &[m, r]).expect("sum")[0];
    net.mark_output(y, "y").expect("y");
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), "cuda").expect("compiles");
    let fused = engine
        .plan()
        .layers
        .iter()
        .any(|l| l.kind.op().kind() == "MatMul" && l.inputs.len() == 4);
    assert!(fused, "the residual rides on the product");
    let reloaded = torchtrt::Runtime::new()
        .expect("runtime")
        .deserialize(&engine.serialize())
        .expect("reloads");
    let cpu = torchtrt::compile_for(&net, &BuildConfig::default(), "cpu").expect("cpu");
    let x = Tensor::from_vec(&[3, 7, 8], random_f32(168, 33)).expect("x");
    let want = cpu
        .create_context()
        .unwrap()
        .execute(&[&x])
        .expect("cpu runs");
    let got = reloaded
        .create_context()
        .expect("context")
        .execute(&[&x])
        .expect("cuda runs");
    assert_close(
        got[0].as_slice::<f32>().expect("f32"),
        want[0].as_slice::<f32>().expect("f32"),
        1e-5,
        1e-4,
    );
}
