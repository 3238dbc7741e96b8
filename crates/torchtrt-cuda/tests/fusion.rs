//! Element-wise fusion on the GPU: an engine whose element-wise chains the builder fused
//! (`Fused` layers, one generated kernel each) gives the unfused engine's outputs on random
//! data, in f32 and f16, at several sizes of a dynamic dim, for rows that are whole 16-byte
//! packs and rows that are not. Without a GPU, the same grouping runs on a CPU backend
//! that opts in (its steps chained by `Fused::chain_kernel`).

mod common;

use std::sync::Arc;

use common::{device_or_skip, random_f32};
use torchtrt_core::layers::{
    Activation, ActivationKind, Elementwise, ElementwiseOp, MatMul, Reshape, Transpose, Unary,
    UnaryOp,
};
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, InferInput, Kernel, LayerKind, NetworkDefinition, Tensor,
    build,
};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::CudaBackend;

/// `h = sigmoid(gelu(x + b)·… + y)` with Gelu as ONNX exports it, and `r = relu(x + b)`,
/// which keeps `x + b` outside the fused group.
fn network(width: usize) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let dims = [
        Dim::dynamic("n", 1, 2, 4),
        Dim::Fixed(5),
        Dim::Fixed(width as i64),
    ];
    let x = net.add_input("x", DType::F32, &dims).expect("x");
    let y = net
        .add_input(
            "y",
            DType::F32,
            &[
                Dim::dynamic("n", 1, 2, 4),
                Dim::Fixed(1),
                Dim::Fixed(width as i64),
            ],
        )
        .expect("y");
    let mut constant = |name: &str, shape: &[usize], v: Vec<f32>| {
        net.add_constant(name, Tensor::from_vec(shape, v).expect("tensor"))
            .expect("constant")
    };
    let bias = constant("bias", &[width], random_f32(width, 7));
    let sqrt2 = constant("sqrt2", &[], vec![std::f32::consts::SQRT_2]);
    let one = constant("one", &[], vec![1.0]);
    let half = constant("half", &[], vec![0.5]);
    let bin = |net: &mut NetworkDefinition, name: &str, op, a, b| {
        net.add(name, Elementwise::new(op), &[a, b]).expect(name)
    };
    let a = bin(&mut net, "add_bias", ElementwiseOp::Add, x, bias);
    let b = bin(&mut net, "div", ElementwiseOp::Div, a, sqrt2);
    let c = net
        .add("erf", Unary { op: UnaryOp::Erf }, &[b])
        .expect("erf");
    let d = bin(&mut net, "add_one", ElementwiseOp::Add, c, one);
    let e = bin(&mut net, "mul", ElementwiseOp::Mul, a, d);
    let f = bin(&mut net, "mul_half", ElementwiseOp::Mul, e, half);
    let g = bin(&mut net, "residual", ElementwiseOp::Add, f, y);
    let sigmoid = Activation {
        kind: ActivationKind::Sigmoid,
    };
    let h = net.add("sigmoid", sigmoid, &[g]).expect("sigmoid");
    let relu = Activation {
        kind: ActivationKind::Relu,
    };
    let r = net.add("relu", relu, &[a]).expect("relu");
    net.mark_output(h, "h").expect("h");
    net.mark_output(r, "r").expect("r");
    net
}

fn engine(cuda: &Arc<dyn Backend>, width: usize, precision: DType, fuse: bool) -> Engine {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let config = BuildConfig {
        device: DeviceKind::Cuda,
        precision,
        fuse_elementwise: fuse,
        ..BuildConfig::default()
    };
    build(&network(width), &config, &[cuda.clone(), cpu]).expect("builds")
}

fn run(engine: &Engine, n: usize, width: usize, seed: u64) -> Vec<Vec<f32>> {
    let x = Tensor::from_vec(&[n, 5, width], random_f32(n * 5 * width, seed)).expect("x");
    let y = Tensor::from_vec(&[n, 1, width], random_f32(n * width, seed + 1)).expect("y");
    let mut ctx = engine.create_context().expect("context");
    ctx.execute(&[&x, &y])
        .expect("runs")
        .iter()
        .map(|t| t.as_slice::<f32>().expect("f32").to_vec())
        .collect()
}

#[test]
fn fused_engines_match_unfused_ones() {
    if device_or_skip().is_none() {
        return;
    }
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu).expect("backend"));
    for precision in [DType::F32, DType::F16] {
        for width in [64, 63] {
            let fused = engine(&cuda, width, precision, true);
            let plain = engine(&cuda, width, precision, false);
            let kinds = |e: &Engine| -> Vec<&'static str> {
                e.plan().layers.iter().map(|l| l.kind.op().kind()).collect()
            };
            let fused_layers = kinds(&fused).iter().filter(|k| **k == "Fused").count();
            assert!(fused_layers >= 1, "{:?}", kinds(&fused));
            assert!(!kinds(&plain).contains(&"Fused"));
            assert!(
                fused.plan().layers.len() + 6 <= plain.plan().layers.len(),
                "{:?} vs {:?}",
                kinds(&fused),
                kinds(&plain)
            );
            let tol = if precision == DType::F32 { 1e-5 } else { 2e-3 };
            for (n, seed) in [(1, 11), (3, 12), (4, 13)] {
                let want = run(&plain, n, width, seed);
                let got = run(&fused, n, width, seed);
                for (o, (g, w)) in got.iter().zip(&want).enumerate() {
                    torchtrt_testing::check_floats(g, w, torchtrt_testing::Tol::new(tol, tol))
                        .unwrap_or_else(|m| {
                            panic!("{precision} width {width} n {n} output {o}: {m}")
                        });
                }
            }
        }
    }
}

/// The CPU backend, asking the builder to fuse.
struct FusingCpu(CpuBackend);

impl Backend for FusingCpu {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn name(&self) -> String {
        "fusing-cpu".into()
    }
    fn prepare(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        self.0.prepare(layer, inputs)
    }
    fn fuses_elementwise(&self) -> bool {
        true
    }
}

/// `net` built for [`FusingCpu`] with the builder's folding and fusion on and off.
fn folded_and_kept(net: &NetworkDefinition) -> (Engine, Engine) {
    let backend: Arc<dyn Backend> = Arc::new(FusingCpu(CpuBackend::new()));
    let on = |fuse| BuildConfig {
        fuse_elementwise: fuse,
        ..BuildConfig::default()
    };
    (
        build(net, &on(true), std::slice::from_ref(&backend)).expect("folded"),
        build(net, &on(false), std::slice::from_ref(&backend)).expect("kept"),
    )
}

/// The names of the layers `engine` runs.
fn layer_names(engine: &Engine) -> Vec<&str> {
    engine
        .plan()
        .layers
        .iter()
        .map(|l| l.name.as_str())
        .collect()
}

/// Both engines on `inputs`: the same shapes and f32 values within 1e-5 (relative).
fn assert_same_outputs(folded: &Engine, kept: &Engine, inputs: &[&Tensor]) {
    let got = folded
        .create_context()
        .unwrap()
        .execute(inputs)
        .expect("folded runs");
    let want = kept
        .create_context()
        .unwrap()
        .execute(inputs)
        .expect("kept runs");
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.shape(), w.shape());
        let (g, w) = (
            g.as_slice::<f32>().expect("f32"),
            w.as_slice::<f32>().expect("f32"),
        );
        torchtrt_testing::check_floats(g, w, torchtrt_testing::Tol::new(1e-5, 1e-5))
            .unwrap_or_else(|m| panic!("{m}"));
    }
}

#[test]
fn grouping_keeps_shared_results_and_matches_on_the_cpu() {
    let backend: Arc<dyn Backend> = Arc::new(FusingCpu(CpuBackend::new()));
    let on = |fuse| BuildConfig {
        fuse_elementwise: fuse,
        ..BuildConfig::default()
    };
    let width = 7;
    let fused = build(&network(width), &on(true), std::slice::from_ref(&backend)).expect("fused");
    let plain = build(&network(width), &on(false), std::slice::from_ref(&backend)).expect("plain");
    let layers: Vec<(String, &'static str)> = fused
        .plan()
        .layers
        .iter()
        .map(|l| (l.name.clone(), l.kind.op().kind()))
        .collect();
    let fused_steps: Vec<usize> = fused
        .plan()
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            LayerKind::Fused(f) => Some(f.steps.len()),
            _ => None,
        })
        .collect();
    assert_eq!(fused_steps, [7], "{layers:?}");
    assert!(
        layers
            .iter()
            .any(|(n, k)| n == "add_bias" && *k == "Elementwise"),
        "x + b has two readers and must stay a layer: {layers:?}"
    );
    for n in [1, 3] {
        let x = Tensor::from_vec(&[n, 5, width], random_f32(n * 5 * width, 3)).expect("x");
        let y = Tensor::from_vec(&[n, 1, width], random_f32(n * width, 4)).expect("y");
        let got = fused
            .create_context()
            .unwrap()
            .execute(&[&x, &y])
            .expect("fused runs");
        let want = plain
            .create_context()
            .unwrap()
            .execute(&[&x, &y])
            .expect("plain runs");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape(), w.shape());
            assert_eq!(
                g.as_slice::<f32>().expect("f32"),
                w.as_slice::<f32>().expect("f32")
            );
        }
    }
}

#[test]
fn transposes_of_the_last_two_dims_fold_into_matmul() {
    let mut net = NetworkDefinition::new();
    let fixed = |d: &[i64]| d.iter().map(|&v| Dim::Fixed(v)).collect::<Vec<_>>();
    let a = net
        .add_input("a", DType::F32, &fixed(&[2, 3, 5, 4]))
        .expect("a");
    let w = net.add_input("w", DType::F32, &fixed(&[6, 5])).expect("w");
    let u = net.add_input("u", DType::F32, &fixed(&[4, 6])).expect("u");
    let swap = |perm: &[usize]| Transpose {
        perm: perm.to_vec(),
    };
    let at = net.add("a_t", swap(&[0, 1, 3, 2]), &[a]).expect("a_t");
    let wt = net.add("w_t", swap(&[1, 0]), &[w]).expect("w_t");
    let other = net.add("a_p", swap(&[0, 2, 1, 3]), &[a]).expect("a_p");
    let plain = MatMul {
        transpose_a: false,
        transpose_b: false,
    };
    let y = net.add("mm", plain.clone(), &[at, wt]).expect("mm");
    let z = net.add("mm2", plain, &[other, u]).expect("mm2");
    net.mark_output(y, "y").expect("y");
    net.mark_output(z, "z").expect("z");
    let (folded, kept) = folded_and_kept(&net);
    assert_eq!(
        layer_names(&folded),
        ["a_p", "mm", "mm2"],
        "only a_t and w_t fold"
    );
    let x = Tensor::from_vec(&[2, 3, 5, 4], random_f32(120, 5)).expect("a");
    let v = Tensor::from_vec(&[6, 5], random_f32(30, 6)).expect("w");
    let r = Tensor::from_vec(&[4, 6], random_f32(24, 7)).expect("u");
    assert_same_outputs(&folded, &kept, &[&x, &v, &r]);
}

/// Attention scores as ONNX exporters write them: the key's last two dims swapped through
/// `Reshape → Transpose → Reshape`, both operands scaled, then `MatMul`.
#[test]
fn an_exported_key_transpose_folds_through_reshapes_and_a_scale() {
    let mut net = NetworkDefinition::new();
    let dims = [2i64, 3, 5, 4].map(Dim::Fixed);
    let q = net.add_input("q", DType::F32, &dims).expect("q");
    let k = net.add_input("k", DType::F32, &dims).expect("k");
    let squeezed = net
        .add("k_sq", Reshape::new(vec![-1, 5, 4]), &[k])
        .expect("k_sq");
    let perm = Transpose {
        perm: vec![0, 2, 1],
    };
    let swapped = net.add("k_t", perm, &[squeezed]).expect("k_t");
    let kt = net
        .add("k_un", Reshape::new(vec![2, 3, 4, 5]), &[swapped])
        .expect("k_un");
    let scale = net
        .add_constant(
            "scale",
            Tensor::from_vec(&[1], vec![0.7f32]).expect("scale"),
        )
        .expect("scale");
    let mul = Elementwise::new(ElementwiseOp::Mul);
    let qs = net.add("q_s", mul.clone(), &[q, scale]).expect("q_s");
    let ks = net.add("k_s", mul, &[scale, kt]).expect("k_s");
    let plain = MatMul {
        transpose_a: false,
        transpose_b: false,
    };
    let y = net.add("scores", plain, &[qs, ks]).expect("scores");
    net.mark_output(y, "y").expect("y");
    let (folded, kept) = folded_and_kept(&net);
    let kinds: Vec<&str> = folded
        .plan()
        .layers
        .iter()
        .map(|l| l.kind.op().kind())
        .collect();
    assert!(
        !kinds.contains(&"Transpose") && !kinds.contains(&"Reshape"),
        "{kinds:?}"
    );
    let x = Tensor::from_vec(&[2, 3, 5, 4], random_f32(120, 8)).expect("q");
    let v = Tensor::from_vec(&[2, 3, 5, 4], random_f32(120, 9)).expect("k");
    assert_same_outputs(&folded, &kept, &[&x, &v]);
    let out = folded
        .create_context()
        .unwrap()
        .execute(&[&x, &v])
        .expect("runs");
    assert_eq!(out[0].shape(), [2, 3, 5, 5]);
}

/// A `Transpose` of a `Transpose` becomes one (and, when the two compose to a swap of the
/// last two dims feeding a `MatMul`, none); a first transpose with another reader stays.
#[test]
fn chains_of_transposes_merge() {
    let mut net = NetworkDefinition::new();
    let dims = [2i64, 3, 5, 4].map(Dim::Fixed);
    let x = net.add_input("x", DType::F32, &dims).expect("x");
    let w = net
        .add_input("w", DType::F32, &[5, 3].map(Dim::Fixed))
        .expect("w");
    let perm = |p: &[usize]| Transpose { perm: p.to_vec() };
    let t1 = net.add("t1", perm(&[1, 0, 2, 3]), &[x]).expect("t1");
    let t2 = net.add("t2", perm(&[0, 2, 1, 3]), &[t1]).expect("t2");
    let s1 = net.add("s1", perm(&[1, 0, 2, 3]), &[x]).expect("s1");
    let s2 = net.add("s2", perm(&[1, 0, 3, 2]), &[s1]).expect("s2");
    let plain = MatMul {
        transpose_a: false,
        transpose_b: false,
    };
    let y = net.add("mm", plain, &[s2, w]).expect("mm");
    let shared = net
        .add("shared", perm(&[3, 2, 1, 0]), &[x])
        .expect("shared");
    let after = net
        .add("after", perm(&[1, 0, 2, 3]), &[shared])
        .expect("after");
    for (t, name) in [(t2, "t2"), (y, "y"), (after, "after"), (shared, "kept")] {
        net.mark_output(t, name).expect(name);
    }
    let (merged, kept) = folded_and_kept(&net);
    assert_eq!(layer_names(&merged), ["t2", "mm", "shared", "after"]);
    let a = Tensor::from_vec(&[2, 3, 5, 4], random_f32(120, 10)).expect("x");
    let b = Tensor::from_vec(&[5, 3], random_f32(15, 11)).expect("w");
    assert_same_outputs(&merged, &kept, &[&a, &b]);
}

/// `x[n,7,k] · W + bias` as exporters write a linear layer (W `[k,m]`, or `[m,k]` read
/// transposed as ONNX `Gemm` has it; the bias `[m]` or `[1,1,m]`, on either side of the Add).
fn linear(
    k: usize,
    m: usize,
    transposed: bool,
    bias_shape: &[usize],
    first: bool,
) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let dims = [
        Dim::dynamic("n", 1, 2, 4),
        Dim::Fixed(7),
        Dim::Fixed(k as i64),
    ];
    let x = net.add_input("x", DType::F32, &dims).expect("x");
    let shape = if transposed { [m, k] } else { [k, m] };
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&shape, random_f32(k * m, 3)).expect("w"),
        )
        .expect("w");
    let b = net
        .add_constant(
            "b",
            Tensor::from_vec(bias_shape, random_f32(m, 4)).expect("b"),
        )
        .expect("b");
    let product = MatMul {
        transpose_a: false,
        transpose_b: transposed,
    };
    let y = net.add("mm", product, &[x, w]).expect("mm");
    let pair = if first { [b, y] } else { [y, b] };
    let z = net
        .add("bias", Elementwise::new(ElementwiseOp::Add), &pair)
        .expect("bias");
    net.mark_output(z, "z").expect("z");
    net
}

#[test]
fn a_linear_layers_bias_rides_on_the_cuda_product() {
    if device_or_skip().is_none() {
        return;
    }
    let cases = [
        (96, 80, false, &[80][..], false),
        (64, 33, true, &[1, 1, 33][..], true),
        (40, 128, true, &[128][..], false),
    ];
    for (k, m, transposed, bias_shape, first) in cases {
        let net = linear(k, m, transposed, bias_shape, first);
        let inputs = |n: usize| {
            vec![Tensor::from_vec(&[n, 7, k], random_f32(n * 7 * k, n as u64)).expect("x")]
        };
        cuda_engines_match_cpu(&net, inputs, |engine, what| {
            let layers = &engine.plan().layers;
            let mm = layers
                .iter()
                .position(|l| matches!(l.kind, LayerKind::MatMul(_)))
                .expect("a MatMul");
            assert_eq!(
                layers[mm].inputs.len(),
                3,
                "{what}: the bias is the third input"
            );
            assert_eq!(engine.plan().devices[mm], DeviceKind::Cuda, "{what}");
        });
    }
}

/// `net` built for CUDA in f32, f16 and bf16: each engine shown to `check` (with what it
/// is), must have no element-wise layer left, and must give the CPU f32 engine's outputs on
/// `inputs(n)` for n = 1, 3, 4 within its precision's tolerance (relative to each element,
/// with a floor of the same times the outputs' root-mean-square).
fn cuda_engines_match_cpu(
    net: &NetworkDefinition,
    inputs: impl Fn(usize) -> Vec<Tensor>,
    check: impl Fn(&Engine, &str),
) {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    let reference = build(net, &BuildConfig::default(), std::slice::from_ref(&cpu)).expect("cpu");
    for (precision, tol) in [(DType::F32, 1e-5), (DType::F16, 1e-2), (DType::BF16, 5e-2)] {
        let config = BuildConfig {
            device: DeviceKind::Cuda,
            precision,
            ..BuildConfig::default()
        };
        let engine = build(net, &config, &[cuda.clone(), cpu.clone()]).expect("builds");
        let what = format!("{precision}");
        check(&engine, &what);
        assert!(
            !engine
                .plan()
                .layers
                .iter()
                .any(|l| matches!(l.kind, LayerKind::Elementwise(_))),
            "{what}: no Add is left"
        );
        for n in [1, 3, 4] {
            let x = inputs(n);
            let x: Vec<&Tensor> = x.iter().collect();
            let got = engine.create_context().unwrap().execute(&x).expect("runs");
            let want = reference
                .create_context()
                .unwrap()
                .execute(&x)
                .expect("ref");
            assert_eq!(got[0].shape(), want[0].shape());
            let (g, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
            let scale = (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt();
            for (i, (g, w)) in g.iter().zip(&w).enumerate() {
                assert!(
                    (g - w).abs() <= tol * (w.abs() + scale),
                    "{what} n {n} [{i}]: {g} vs {w}"
                );
            }
        }
    }
}

/// `r + (x · W [+ bias])`: a transformer block's residual after its projection.
fn projection_and_residual(k: usize, m: usize, bias: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let dims = |last: usize| {
        [
            Dim::dynamic("n", 1, 2, 4),
            Dim::Fixed(7),
            Dim::Fixed(last as i64),
        ]
    };
    let x = net.add_input("x", DType::F32, &dims(k)).expect("x");
    let r = net.add_input("r", DType::F32, &dims(m)).expect("r");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[k, m], random_f32(k * m, 5)).expect("w"),
        )
        .expect("w");
    let mut y = net.add("mm", MatMul::default(), &[x, w]).expect("mm");
    if bias {
        let b = net
            .add_constant("b", Tensor::from_vec(&[m], random_f32(m, 6)).expect("b"))
            .expect("b");
        y = net
            .add("bias", Elementwise::new(ElementwiseOp::Add), &[y, b])
            .expect("bias");
    }
    let z = net
        .add("residual", Elementwise::new(ElementwiseOp::Add), &[r, y])
        .expect("residual");
    net.mark_output(z, "z").expect("z");
    net
}

#[test]
fn a_residual_add_rides_on_the_cuda_product() {
    if device_or_skip().is_none() {
        return;
    }
    for (k, m, bias) in [(96, 80, true), (64, 40, false)] {
        let net = projection_and_residual(k, m, bias);
        let inputs = |n: usize| {
            vec![
                Tensor::from_vec(&[n, 7, k], random_f32(n * 7 * k, 20 + n as u64)).expect("x"),
                Tensor::from_vec(&[n, 7, m], random_f32(n * 7 * m, 30 + n as u64)).expect("r"),
            ]
        };
        cuda_engines_match_cpu(&net, inputs, |engine, what| {
            assert!(
                engine
                    .plan()
                    .layers
                    .iter()
                    .any(|l| matches!(l.kind, LayerKind::MatMul(_)) && l.inputs.len() == 4),
                "{what} bias {bias}: bias and residual are the MatMul's third and fourth inputs"
            );
        });
    }
}
