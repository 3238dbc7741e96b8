//! The builder with real CPU kernels: constant folding, shape tensors, reduced precision,
//! plugin format negotiation, and errors that name the layer.

mod common;

use std::sync::Arc;

use common::{assert_close, random_f32};
use torchtrt::layers::{
    Activation, ActivationKind, Cast, Concat, Convolution, Elementwise, ElementwiseOp, Gather,
    LayerKind, MatMul, Range, Reshape, Select, Shape, Slice, Softmax, Squeeze, Transpose, Unary,
    UnaryOp, Unsqueeze, ValueTest, ValueTestKind,
};
use torchtrt::plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator, PluginError,
    PluginKey, PluginResult, PortDesc, ShapeExpr,
};
use torchtrt::{
    BuildConfig, Dim, Engine, Error, NetworkDefinition, OnDuplicate, Tensor, TensorId, registry,
};

/// A batch dim from 1 to 4, optimised for 2.
fn dynamic_batch() -> Dim {
    Dim::Dynamic {
        name: "batch".into(),
        min: 1,
        opt: 2,
        max: 4,
    }
}

fn kinds(engine: &Engine) -> Vec<&'static str> {
    engine
        .plan()
        .layers
        .iter()
        .map(|l| l.kind.op().kind())
        .collect()
}

#[test]
fn constant_subgraphs_fold_away() {
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F32, &[Dim::Fixed(4)]).unwrap();
    let a = net
        .add_constant(
            "a",
            Tensor::from_vec(&[4], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap(),
        )
        .unwrap();
    let b = net
        .add_constant(
            "b",
            Tensor::from_vec(&[4], vec![0.5f32, 0.5, 2.0, -1.0]).unwrap(),
        )
        .unwrap();
    let ab = net
        .add("ab", Elementwise::new(ElementwiseOp::Mul), &[a, b])
        .unwrap();
    let y = net
        .add("y", Elementwise::new(ElementwiseOp::Add), &[x, ab])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    assert_eq!(kinds(&engine), ["Constant", "Elementwise"], "a·b is folded");
    let out = engine
        .create_context()
        .unwrap()
        .execute(&[&Tensor::from_vec(&[4], vec![1.0f32; 4]).unwrap()])
        .unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[1.5, 2.0, 7.0, -3.0]);

    let unfolded = torchtrt::compile(
        &net,
        &BuildConfig {
            fold_constants: false,
            ..BuildConfig::default()
        },
    )
    .unwrap();
    assert_eq!(
        kinds(&unfolded),
        ["Constant", "Constant", "Elementwise", "Elementwise"]
    );
}

#[test]
fn shape_tensors_from_constants_fold_into_reshape() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), Dim::Fixed(6)],
        )
        .unwrap();
    let s1 = net
        .add_constant("s1", Tensor::from_vec(&[2], vec![3i64, 2]).unwrap())
        .unwrap();
    let s0 = net
        .add_constant("s0", Tensor::from_vec(&[1], vec![-1i64]).unwrap())
        .unwrap();
    let shape = net
        .add("shape", torchtrt::layers::Concat { axis: 0 }, &[s0, s1])
        .unwrap();
    let y = net.add("reshape", Reshape::default(), &[x, shape]).unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    assert_eq!(kinds(&engine), ["Constant", "Reshape"]);
    let xs = random_f32(18, 3);
    let out = engine
        .create_context()
        .unwrap()
        .execute(&[&Tensor::from_vec(&[3, 6], xs.clone()).unwrap()])
        .unwrap();
    assert_eq!(out[0].shape(), &[3, 3, 2]);
    assert_eq!(out[0].as_slice::<f32>().unwrap(), xs.as_slice());
}

fn mlp(precision: DType) -> Engine {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 4, 8), Dim::Fixed(16)],
        )
        .unwrap();
    let w = net
        .add_constant("w", Tensor::from_vec(&[16, 8], random_f32(128, 1)).unwrap())
        .unwrap();
    let h = net.add("mm", MatMul::default(), &[x, w]).unwrap();
    let r = net
        .add(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[h],
        )
        .unwrap();
    net.mark_output(r, "y").unwrap();
    torchtrt::compile(
        &net,
        &BuildConfig {
            precision,
            ..BuildConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn reduced_precision_casts_at_the_edges_and_stays_close() {
    let input = Tensor::from_vec(&[5, 16], random_f32(80, 9)).unwrap();
    let reference = mlp(DType::F32)
        .create_context()
        .unwrap()
        .execute(&[&input])
        .unwrap();
    for precision in [DType::F16, DType::BF16] {
        let engine = mlp(precision);
        assert_eq!(
            kinds(&engine),
            ["Cast", "Constant", "MatMul", "Activation", "Cast"]
        );
        let types = engine.tensor_types();
        let mm = &engine.plan().layers[2];
        assert_eq!(types[mm.outputs[0].index()].dtype, precision);
        let out = engine.create_context().unwrap().execute(&[&input]).unwrap();
        assert_eq!(out[0].dtype(), DType::F32);
        let tol = if precision == DType::F16 { 1e-2 } else { 4e-2 };
        assert_close(
            out[0].as_slice::<f32>().unwrap(),
            reference[0].as_slice::<f32>().unwrap(),
            tol,
            tol,
        );
    }
}

/// With a reduced precision, outputs the network computes in f32 come back as f32, and
/// outputs it declares in f16 (a cast to f16, an f16 input's path) stay f16, as built at f32.
#[test]
fn reduced_precision_keeps_outputs_the_network_declares_in_f16() {
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F32, &[Dim::Fixed(6)]).unwrap();
    let h = net.add_input("h", DType::F16, &[Dim::Fixed(6)]).unwrap();
    let relu = || Activation {
        kind: ActivationKind::Relu,
    };
    let a = net.add("relu_x", relu(), &[x]).unwrap();
    let c = net.add("to_f16", Cast { to: DType::F16 }, &[a]).unwrap();
    let b = net.add("relu_h", relu(), &[h]).unwrap();
    net.mark_output(a, "a").unwrap();
    net.mark_output(c, "c").unwrap();
    net.mark_output(b, "b").unwrap();
    let xs = random_f32(6, 4);
    let hs: Vec<half::f16> = random_f32(6, 5)
        .into_iter()
        .map(half::f16::from_f32)
        .collect();
    let inputs = [
        Tensor::from_vec(&[6], xs.clone()).unwrap(),
        Tensor::from_vec(&[6], hs.clone()).unwrap(),
    ];
    for precision in [DType::F32, DType::F16] {
        let config = BuildConfig {
            precision,
            ..BuildConfig::default()
        };
        let engine = torchtrt::compile(&net, &config).unwrap();
        let out = engine
            .create_context()
            .unwrap()
            .execute(&[&inputs[0], &inputs[1]])
            .unwrap();
        let dtypes: Vec<DType> = out.iter().map(Tensor::dtype).collect();
        assert_eq!(dtypes, [DType::F32, DType::F16, DType::F16], "{precision}");
        let want_b: Vec<half::f16> = hs.iter().map(|v| v.max(half::f16::ZERO)).collect();
        assert_eq!(out[2].as_slice::<half::f16>().unwrap(), want_b.as_slice());
        let want_c: Vec<half::f16> = xs.iter().map(|v| half::f16::from_f32(v.max(0.0))).collect();
        assert_eq!(out[1].as_slice::<half::f16>().unwrap(), want_c.as_slice());
    }
}

/// Doubles f32 tensors; accepts nothing else, so the builder must cast around it.
#[derive(Clone)]
struct DoubleF32;

impl Plugin for DoubleF32 {
    fn num_outputs(&self) -> usize {
        1
    }
    fn output_dtypes(&self, _: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![DType::F32])
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(vec![inputs[0].clone()])
    }
    fn supports(&self, pos: usize, io: &[PortDesc], _: usize, device: DeviceKind) -> bool {
        device == DeviceKind::Cpu && io[pos].dtype == DType::F32
    }
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(l) = launch else {
            return Err(PluginError::Unsupported("cuda".into()));
        };
        let x = l.inputs[0].typed::<f32>()?.to_vec();
        for (o, v) in l.outputs[0].typed_mut::<f32>()?.iter_mut().zip(x) {
            *o = 2.0 * v;
        }
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

struct DoubleCreator;

impl PluginCreator for DoubleCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("builder_test", "DoubleF32", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(DoubleF32))
    }
}

#[test]
fn plugins_get_the_dtype_they_support() {
    torchtrt::init_plugins().unwrap();
    registry()
        .register(Arc::new(DoubleCreator), "builder tests", OnDuplicate::Skip)
        .unwrap();
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F16, &[Dim::Fixed(3)]).unwrap();
    let y = net
        .add_plugin(
            "double",
            registry(),
            &DoubleCreator.key(),
            &FieldCollection::new(),
            &[x],
        )
        .unwrap();
    net.mark_output(y[0], "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    assert_eq!(kinds(&engine), ["Cast", "Plugin"]);
    let input = Tensor::from_vec(&[3], vec![half::f16::from_f32(1.5); 3]).unwrap();
    let out = engine.create_context().unwrap().execute(&[&input]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[3.0, 3.0, 3.0]);

    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::I32, &[Dim::Fixed(3)]).unwrap();
    net.add_plugin(
        "double",
        registry(),
        &DoubleCreator.key(),
        &FieldCollection::new(),
        &[x],
    )
    .map(|y| net.mark_output(y[0], "y"))
    .unwrap()
    .unwrap();
    let err = torchtrt::compile(&net, &BuildConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("`double`") && err.contains("i32"), "{err}");
}

#[test]
fn build_errors_name_the_layer() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::Fixed(1), Dim::Fixed(3), Dim::Fixed(8), Dim::Fixed(8)],
        )
        .unwrap();
    let w = net
        .add_constant("w", Tensor::zeros(DType::F32, &[4, 2, 3, 3]))
        .unwrap();
    let y = net.add("stem_conv", Convolution::new(2), &[x, w]).unwrap();
    net.mark_output(y, "y").unwrap();
    let err = torchtrt::compile(&net, &BuildConfig::default())
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::Layer { ref layer, kind: "Convolution", .. } if layer == "stem_conv"),
        "{err}"
    );
    assert!(err.to_string().contains("3 channels"), "{err}");

    let empty = NetworkDefinition::new();
    assert!(torchtrt::compile(&empty, &BuildConfig::default()).is_err());

    let mut net = NetworkDefinition::new();
    let a = net.add_input("a", DType::F32, &[Dim::Fixed(2)]).unwrap();
    let b = net.add_input("b", DType::F32, &[Dim::Fixed(3)]).unwrap();
    let s = net
        .add(
            "sum",
            LayerKind::Elementwise(Elementwise::new(ElementwiseOp::Add)),
            &[a, b],
        )
        .unwrap();
    net.mark_output(s, "s").unwrap();
    let err = torchtrt::compile(&net, &BuildConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("`sum`") && err.contains("broadcast"), "{err}");
}

#[test]
fn engine_and_contexts_are_thread_safe_types() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Engine>();
    send_sync::<torchtrt::Runtime>();
    send::<torchtrt::ExecutionContext>();
}

#[test]
fn reduced_precision_converts_constant_fills() {
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F32, &[Dim::Fixed(3)]).unwrap();
    let shape = net
        .add_constant("shape", Tensor::from_vec(&[1], vec![3i64]).unwrap())
        .unwrap();
    let fill = net
        .add(
            "fill",
            torchtrt::layers::ConstantOfShape::new(2.5f32),
            &[shape],
        )
        .unwrap();
    let y = net
        .add("sum", Elementwise::new(ElementwiseOp::Add), &[x, fill])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = torchtrt::compile(
        &net,
        &BuildConfig {
            precision: DType::F16,
            fold_constants: false,
            ..BuildConfig::default()
        },
    )
    .unwrap();
    let out = engine
        .create_context()
        .unwrap()
        .execute(&[&Tensor::from_vec(&[3], vec![1.0f32, -1.0, 0.5]).unwrap()])
        .unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[3.5, 1.5, 3.0]);
}

/// Attention's scale as PyTorch exports it: `1 / sqrt(float(q.shape[-1]))`, from the shape's
/// integers through a cast to f32, multiplying the f32 activations. In reduced precision the
/// cast yields the reduced type, and an output read from it still comes back in f32.
#[test]
fn reduced_precision_casts_to_f32_meet_reduced_tensors() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), Dim::Fixed(9)],
        )
        .unwrap();
    let dims = net
        .add(
            "shape",
            Shape {
                start: -1,
                end: None,
            },
            &[x],
        )
        .unwrap();
    let width = net.add("cast", Cast { to: DType::F32 }, &[dims]).unwrap();
    let root = net
        .add("sqrt", Unary { op: UnaryOp::Sqrt }, &[width])
        .unwrap();
    let one = net
        .add_constant("one", Tensor::from_vec(&[1], vec![1.0f32]).unwrap())
        .unwrap();
    let scale = net
        .add("div", Elementwise::new(ElementwiseOp::Div), &[one, root])
        .unwrap();
    let y = net
        .add("mul", Elementwise::new(ElementwiseOp::Mul), &[x, scale])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    net.mark_output(width, "width").unwrap();
    for precision in [DType::F16, DType::BF16] {
        let engine = torchtrt::compile(
            &net,
            &BuildConfig {
                precision,
                fold_constants: false,
                ..BuildConfig::default()
            },
        )
        .unwrap_or_else(|e| panic!("{precision}: {e}"));
        let values = random_f32(18, 21);
        let x = Tensor::from_vec(&[2, 9], values.clone()).unwrap();
        let out = engine.create_context().unwrap().execute(&[&x]).unwrap();
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[9.0], "{precision}");
        let want: Vec<f32> = values.iter().map(|v| v / 3.0).collect();
        assert_close(out[0].as_slice::<f32>().unwrap(), &want, 1e-2, 1e-2);
    }
}

#[test]
fn per_channel_affine_and_relu_fold_into_the_convolution() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[
                Dim::dynamic("n", 1, 1, 4),
                Dim::Fixed(3),
                Dim::Fixed(6),
                Dim::Fixed(6),
            ],
        )
        .unwrap();
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[4, 3, 3, 3], random_f32(108, 11)).unwrap(),
        )
        .unwrap();
    let s = net
        .add_constant(
            "s",
            Tensor::from_vec(&[1, 4, 1, 1], random_f32(4, 12)).unwrap(),
        )
        .unwrap();
    let t = net
        .add_constant(
            "t",
            Tensor::from_vec(&[4, 1, 1], random_f32(4, 13)).unwrap(),
        )
        .unwrap();
    let c = net.add("conv", Convolution::new(2), &[x, w]).unwrap();
    let m = net
        .add("bn_scale", Elementwise::new(ElementwiseOp::Mul), &[c, s])
        .unwrap();
    let a = net
        .add("bn_shift", Elementwise::new(ElementwiseOp::Add), &[t, m])
        .unwrap();
    let r = net
        .add(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[a],
        )
        .unwrap();
    net.mark_output(r, "y").unwrap();
    let fused = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    assert_eq!(kinds(&fused), ["Constant", "Constant", "Convolution"]);
    let plain = torchtrt::compile(
        &net,
        &BuildConfig {
            fold_constants: false,
            ..BuildConfig::default()
        },
    )
    .unwrap();
    assert!(kinds(&plain).contains(&"Elementwise"));
    let input = Tensor::from_vec(&[2, 3, 6, 6], random_f32(216, 14)).unwrap();
    let want = plain.create_context().unwrap().execute(&[&input]).unwrap();
    let got = fused.create_context().unwrap().execute(&[&input]).unwrap();
    assert_close(
        got[0].as_slice::<f32>().unwrap(),
        want[0].as_slice::<f32>().unwrap(),
        1e-5,
        1e-5,
    );
    let reloaded = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&fused.serialize())
        .unwrap();
    assert_eq!(
        reloaded
            .create_context()
            .unwrap()
            .execute(&[&input])
            .unwrap(),
        got
    );
}

/// How an exported attention is written: the key's transpose, the scale as a division or
/// a multiplication, a padding mask added (before the scale when `mask_first`, which is
/// not attention's order), a causal mask selected, a boolean padding mask selected; with
/// `split_scale`, the scale's square root multiplies `q` and `kᵀ` instead of the scores (as
/// the ONNX export of `scaled_dot_product_attention` writes it), the key's before its
/// transpose when `key_first`; with `safe`, the softmax is PyTorch's safe softmax
/// (`Where(IsNaN(p), 0, p)`, as `torch.export` writes it; `safe_fill` in place of 0).
#[derive(Clone, Copy, Default)]
struct Sdpa {
    divide: bool,
    padding: bool,
    causal: bool,
    mask_first: bool,
    bool_mask: bool,
    split_scale: bool,
    key_first: bool,
    safe: bool,
    safe_fill: f32,
}

/// `MatMul(Softmax(s), v)`, the softmax over the last axis: the end of an exported attention;
/// with `safe`, `MatMul(Where(IsNaN(p), safe, p), v)` with `p = Softmax(s)`, the end of one
/// exported by `torch.export`, whose safe softmax (`safe` 0) turns rows of masked keys into
/// zeros.
fn attend(net: &mut NetworkDefinition, s: TensorId, v: TensorId, safe: Option<f32>) -> TensorId {
    let mut p = net
        .add(
            "p",
            Softmax {
                axis: -1,
                log: false,
            },
            &[s],
        )
        .unwrap();
    if let Some(fill) = safe {
        let nan = net
            .add(
                "nan",
                ValueTest {
                    test: ValueTestKind::Nan,
                },
                &[p],
            )
            .unwrap();
        let fill = net
            .add_constant("safe_fill", Tensor::from_vec(&[], vec![fill]).unwrap())
            .unwrap();
        p = net.add("safe", Select, &[nan, fill, p]).unwrap();
    }
    net.add("y", MatMul::default(), &[p, v]).unwrap()
}

/// `MatMul(Softmax(mask(q · kᵀ / 8)), v)` over `[2, 3, 5, 8]` operands, the key given as
/// `[2, 5, 3, 8]` and moved into place by one `Transpose` (as exporters write it); the
/// scores are an output too when `leak`.
fn sdpa_network(form: Sdpa, leak: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let dims = |d: &[i64]| d.iter().map(|&v| Dim::Fixed(v)).collect::<Vec<_>>();
    let q = net
        .add_input("q", DType::F32, &dims(&[2, 3, 5, 8]))
        .unwrap();
    let k = net
        .add_input("k", DType::F32, &dims(&[2, 5, 3, 8]))
        .unwrap();
    let v = net
        .add_input("v", DType::F32, &dims(&[2, 3, 5, 6]))
        .unwrap();
    let root = net
        .add_constant(
            "root",
            Tensor::from_vec(&[1], vec![0.125f32.sqrt()]).unwrap(),
        )
        .unwrap();
    let by_root = |net: &mut NetworkDefinition, name: &str, x: TensorId| {
        net.add(name, Elementwise::new(ElementwiseOp::Mul), &[x, root])
            .unwrap()
    };
    let (q, k) = if form.split_scale {
        let k = if form.key_first {
            by_root(&mut net, "k_scaled", k)
        } else {
            k
        };
        (by_root(&mut net, "q_scaled", q), k)
    } else {
        (q, k)
    };
    let mut kt = net
        .add(
            "kt",
            Transpose {
                perm: vec![0, 2, 3, 1],
            },
            &[k],
        )
        .unwrap();
    if form.split_scale && !form.key_first {
        kt = by_root(&mut net, "kt_scaled", kt);
    }
    let qk = net.add("qk", MatMul::default(), &[q, kt]).unwrap();
    let mask = form.padding.then(|| {
        net.add_input("m", DType::F32, &dims(&[2, 1, 1, 5]))
            .unwrap()
    });
    let mut s = qk;
    if let (Some(m), true) = (mask, form.mask_first) {
        s = net
            .add("masked", Elementwise::new(ElementwiseOp::Add), &[s, m])
            .unwrap();
    }
    let (op, c) = if form.divide {
        (ElementwiseOp::Div, 8.0f32)
    } else {
        (ElementwiseOp::Mul, 0.125)
    };
    if !form.split_scale {
        let c = net
            .add_constant("c", Tensor::from_vec(&[], vec![c]).unwrap())
            .unwrap();
        s = net.add("scaled", Elementwise::new(op), &[s, c]).unwrap();
    }
    if form.causal {
        let tril: Vec<u8> = (0..25).map(|i| u8::from(i % 5 <= i / 5)).collect();
        let cond = net
            .add_constant(
                "tril",
                Tensor::from_bytes(DType::Bool, &[1, 1, 5, 5], &tril).unwrap(),
            )
            .unwrap();
        let fill = net
            .add_constant("fill", Tensor::from_vec(&[], vec![-1e9f32]).unwrap())
            .unwrap();
        s = net.add("causal", Select, &[cond, s, fill]).unwrap();
    }
    if let (Some(m), false) = (mask, form.mask_first) {
        s = net
            .add("masked", Elementwise::new(ElementwiseOp::Add), &[m, s])
            .unwrap();
    }
    if form.bool_mask {
        let keep = net
            .add_input("keep", DType::Bool, &dims(&[2, 1, 1, 5]))
            .unwrap();
        let fill = net
            .add_constant(
                "neg_inf",
                Tensor::from_vec(&[], vec![f32::NEG_INFINITY]).unwrap(),
            )
            .unwrap();
        s = net.add("kept", Select, &[keep, s, fill]).unwrap();
    }
    let y = attend(&mut net, s, v, form.safe.then_some(form.safe_fill));
    net.mark_output(y, "y").unwrap();
    if leak {
        net.mark_output(qk, "scores").unwrap();
    }
    net
}

/// `net` compiled with attention fusion (the default) and without.
fn fused_and_plain(net: &NetworkDefinition) -> (Engine, Engine) {
    let fused = torchtrt::compile(net, &BuildConfig::default()).unwrap();
    let plain = torchtrt::compile(
        net,
        &BuildConfig {
            fuse_attention: false,
            ..BuildConfig::default()
        },
    )
    .unwrap();
    (fused, plain)
}

#[test]
fn exported_attention_becomes_one_layer() {
    let forms = [
        Sdpa {
            divide: true,
            padding: true,
            ..Sdpa::default()
        },
        Sdpa {
            causal: true,
            ..Sdpa::default()
        },
        Sdpa {
            divide: true,
            padding: true,
            causal: true,
            ..Sdpa::default()
        },
        Sdpa {
            padding: true,
            mask_first: true,
            ..Sdpa::default()
        },
        Sdpa {
            causal: true,
            bool_mask: true,
            ..Sdpa::default()
        },
        Sdpa {
            split_scale: true,
            ..Sdpa::default()
        },
        Sdpa {
            split_scale: true,
            key_first: true,
            padding: true,
            ..Sdpa::default()
        },
        Sdpa {
            split_scale: true,
            bool_mask: true,
            safe: true,
            ..Sdpa::default()
        },
    ];
    for (i, form) in forms.into_iter().enumerate() {
        let (fused, plain) = fused_and_plain(&sdpa_network(form, false));
        let ks = kinds(&fused);
        if form.mask_first {
            assert!(!ks.contains(&"Attention"), "form {i}: {ks:?}");
        } else {
            assert!(ks.contains(&"Attention"), "form {i}: {ks:?}");
            assert!(
                !ks.contains(&"Softmax") && !ks.contains(&"MatMul"),
                "form {i}: {ks:?}"
            );
            if form.split_scale {
                assert!(!ks.contains(&"Elementwise"), "form {i}: {ks:?}");
            }
        }
        assert!(kinds(&plain).contains(&"Softmax"));
        let seed = 40 + i as u64;
        let q = Tensor::from_vec(&[2, 3, 5, 8], random_f32(240, seed)).unwrap();
        let k = Tensor::from_vec(&[2, 5, 3, 8], random_f32(240, seed + 1)).unwrap();
        let v = Tensor::from_vec(&[2, 3, 5, 6], random_f32(180, seed + 2)).unwrap();
        let mask: Vec<f32> = (0..10)
            .map(|j| if j % 5 == 4 { -1e9 } else { 0.0 })
            .collect();
        let m = Tensor::from_vec(&[2, 1, 1, 5], mask).unwrap();
        let keep: Vec<u8> = (0..10)
            .map(|j| u8::from(j != 3 && j != 9 && !(form.safe && j >= 5)))
            .collect();
        let keep = Tensor::from_bytes(DType::Bool, &[2, 1, 1, 5], &keep).unwrap();
        let mut inputs = vec![&q, &k, &v];
        if form.padding {
            inputs.push(&m);
        }
        if form.bool_mask {
            inputs.push(&keep);
        }
        let got = fused.create_context().unwrap().execute(&inputs).unwrap();
        let want = plain.create_context().unwrap().execute(&inputs).unwrap();
        if form.safe {
            let masked = &want[0].as_slice::<f32>().unwrap()[90..];
            assert!(masked.iter().all(|&v| v == 0.0), "form {i}: {masked:?}");
        }
        assert_close(
            got[0].as_slice::<f32>().unwrap(),
            want[0].as_slice::<f32>().unwrap(),
            1e-5,
            1e-4,
        );
    }
}

/// Attention whose padding mask is gathered from the token mask `keep [batch, seq]` by
/// `Range(0, seq, 1)` indices, `seq` read by `Shape` + `Squeeze` (as `torch.export` writes
/// HF BERT's and T5's masks), under a dynamic batch and sequence: the builder follows the
/// range's length back to `seq`, so the mask's keys match the scores' and the chain fuses.
#[test]
fn a_mask_gathered_by_a_range_over_the_sequence_fuses() {
    let mut net = NetworkDefinition::new();
    let seq = Dim::Dynamic {
        name: "seq".into(),
        min: 2,
        opt: 5,
        max: 8,
    };
    let dims = [dynamic_batch(), Dim::Fixed(2), seq.clone(), Dim::Fixed(4)];
    let [q, k, v] = ["q", "k", "v"].map(|n| net.add_input(n, DType::F32, &dims).unwrap());
    let keep = net
        .add_input("keep", DType::Bool, &[dynamic_batch(), seq])
        .unwrap();
    let len = net
        .add(
            "len",
            Shape {
                start: 1,
                end: Some(2),
            },
            &[keep],
        )
        .unwrap();
    let len = net
        .add(
            "n",
            Squeeze {
                axes: Some(vec![0]),
            },
            &[len],
        )
        .unwrap();
    let [zero, one] = [("zero", 0i64), ("one", 1)].map(|(n, v)| {
        net.add_constant(n, Tensor::from_vec(&[], vec![v]).unwrap())
            .unwrap()
    });
    let idx = net.add("idx", Range, &[zero, len, one]).unwrap();
    let kept = net.add("gather", Gather { axis: 1 }, &[keep, idx]).unwrap();
    let kept = net
        .add("unsqueeze", Unsqueeze { axes: vec![1, 2] }, &[kept])
        .unwrap();
    let kt = net
        .add(
            "kt",
            Transpose {
                perm: vec![0, 1, 3, 2],
            },
            &[k],
        )
        .unwrap();
    let qk = net.add("qk", MatMul::default(), &[q, kt]).unwrap();
    let [half, neg_inf] = [("half", 0.5f32), ("neg_inf", f32::NEG_INFINITY)].map(|(n, v)| {
        net.add_constant(n, Tensor::from_vec(&[], vec![v]).unwrap())
            .unwrap()
    });
    let s = net
        .add("scaled", Elementwise::new(ElementwiseOp::Mul), &[qk, half])
        .unwrap();
    let s = net.add("masked", Select, &[kept, s, neg_inf]).unwrap();
    let y = attend(&mut net, s, v, None);
    net.mark_output(y, "y").unwrap();

    let (fused, plain) = fused_and_plain(&net);
    let ks = kinds(&fused);
    assert!(
        ks.contains(&"Attention") && !ks.contains(&"Softmax"),
        "{ks:?}"
    );
    for (batch, seq) in [(3, 6), (1, 2)] {
        let n = batch * 2 * seq * 4;
        let [q, k, v] = [0, 1, 2]
            .map(|i| Tensor::from_vec(&[batch, 2, seq, 4], random_f32(n, 70 + i)).unwrap());
        let keep: Vec<u8> = (0..batch * seq).map(|j| u8::from(j % 3 != 2)).collect();
        let keep = Tensor::from_bytes(DType::Bool, &[batch, seq], &keep).unwrap();
        let inputs = [&q, &k, &v, &keep];
        let got = fused.create_context().unwrap().execute(&inputs).unwrap();
        let want = plain.create_context().unwrap().execute(&inputs).unwrap();
        assert_eq!(got[0].shape(), [batch, 2, seq, 4]);
        assert_close(
            got[0].as_slice::<f32>().unwrap(),
            want[0].as_slice::<f32>().unwrap(),
            1e-5,
            1e-4,
        );
    }
}

/// Exported multi-head attention over projections `[batch, seq, heads · head]` (3 heads of
/// 8, values of 6, a dynamic batch): each operand split by `Reshape` + `Transpose`, the
/// output joined back by `Transpose` + a `Reshape` to `join`, an additive padding mask. With
/// `leak_heads`, the attention's `[batch, heads, seq, 6]` output is a network output too.
fn heads_network(leak_heads: bool, join: &[i64]) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let batch = dynamic_batch();
    let dims = |rest: &[i64]| {
        std::iter::once(batch.clone())
            .chain(rest.iter().map(|&v| Dim::Fixed(v)))
            .collect::<Vec<_>>()
    };
    let xq = net.add_input("xq", DType::F32, &dims(&[5, 24])).unwrap();
    let xk = net.add_input("xk", DType::F32, &dims(&[7, 24])).unwrap();
    let xv = net.add_input("xv", DType::F32, &dims(&[7, 18])).unwrap();
    let m = net.add_input("m", DType::F32, &dims(&[1, 1, 7])).unwrap();
    let mut split = |name: &str, x, head: i64, perm: Vec<usize>| {
        let r = net
            .add(
                &format!("{name}_split"),
                Reshape::new(vec![0, 0, 3, head]),
                &[x],
            )
            .unwrap();
        net.add(&format!("{name}_heads"), Transpose { perm }, &[r])
            .unwrap()
    };
    let q = split("q", xq, 8, vec![0, 2, 1, 3]);
    let kt = split("k", xk, 8, vec![0, 2, 3, 1]);
    let v = split("v", xv, 6, vec![0, 2, 1, 3]);
    let qk = net.add("qk", MatMul::default(), &[q, kt]).unwrap();
    let c = net
        .add_constant("c", Tensor::from_vec(&[], vec![0.3f32]).unwrap())
        .unwrap();
    let s = net
        .add("scaled", Elementwise::new(ElementwiseOp::Mul), &[qk, c])
        .unwrap();
    let s = net
        .add("masked", Elementwise::new(ElementwiseOp::Add), &[s, m])
        .unwrap();
    let y = attend(&mut net, s, v, None);
    let t = net
        .add(
            "join",
            Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[y],
        )
        .unwrap();
    let out = net
        .add("joined", Reshape::new(join.to_vec()), &[t])
        .unwrap();
    net.mark_output(out, "out").unwrap();
    if leak_heads {
        net.mark_output(y, "heads").unwrap();
    }
    net
}

#[test]
fn heads_split_and_joined_by_reshapes_fold_into_attention() {
    for (leak, join) in [
        (false, &[0, 0, 18][..]),
        (false, &[-1, 18]),
        (true, &[0, 0, 18]),
    ] {
        let (fused, plain) = fused_and_plain(&heads_network(leak, join));
        let ks = kinds(&fused);
        let attention = fused
            .plan()
            .layers
            .iter()
            .find_map(|l| match &l.kind {
                LayerKind::Attention(a) => Some(a.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no attention: {ks:?}"));
        if leak {
            assert_eq!(attention.q_heads, 0, "{ks:?}");
        } else {
            assert_eq!((attention.q_heads, attention.kv_heads), (3, 3));
            assert!(
                ks.iter().all(|k| *k == "Attention" || *k == "Reshape"),
                "every transpose folded: {ks:?}"
            );
        }
        for batch in [1usize, 3] {
            let seed = 70 + batch as u64;
            let xq = Tensor::from_vec(&[batch, 5, 24], random_f32(batch * 120, seed)).unwrap();
            let xk = Tensor::from_vec(&[batch, 7, 24], random_f32(batch * 168, seed + 1)).unwrap();
            let xv = Tensor::from_vec(&[batch, 7, 18], random_f32(batch * 126, seed + 2)).unwrap();
            let mask: Vec<f32> = (0..batch * 7)
                .map(|j| {
                    if j % 7 >= 5 + j / 7 % 2 {
                        -1e9
                    } else {
                        0.1 * (j % 3) as f32
                    }
                })
                .collect();
            let m = Tensor::from_vec(&[batch, 1, 1, 7], mask).unwrap();
            let inputs = [&xq, &xk, &xv, &m];
            let got = fused.create_context().unwrap().execute(&inputs).unwrap();
            let want = plain.create_context().unwrap().execute(&inputs).unwrap();
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.shape(), w.shape());
                assert_close(
                    g.as_slice::<f32>().unwrap(),
                    w.as_slice::<f32>().unwrap(),
                    1e-5,
                    1e-4,
                );
            }
        }
    }
}

/// Attention whose scores are read elsewhere, and a `Where` after its softmax other than the
/// safe softmax (a fill of 1), stay apart.
#[test]
fn attention_that_is_not_one_stays_apart() {
    let scores_read = Sdpa {
        divide: true,
        ..Sdpa::default()
    };
    let unsafe_fill = Sdpa {
        safe: true,
        safe_fill: 1.0,
        ..Sdpa::default()
    };
    for (form, leak) in [(scores_read, true), (unsafe_fill, false)] {
        let engine = torchtrt::compile(&sdpa_network(form, leak), &BuildConfig::default()).unwrap();
        let ks = kinds(&engine);
        assert!(
            !ks.contains(&"Attention") && ks.contains(&"Softmax"),
            "{ks:?}"
        );
    }
}

/// `x [batch, 3, 5, 4]` (dynamic batch) through `Reshape(x, [-1, 5, 4])`, `Transpose([0, 2,
/// 1])` and `Reshape(…, last)`, both shapes computed from `Shape(x)` by `Slice` and `Concat`
/// as `torch.export` writes `x.transpose(-2, -1)`; `last` lists, per output dim, the dim of
/// `x` it takes (`None`: a `-1`).
fn reshaped_transpose_network(last: [Option<usize>; 4]) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let batch = dynamic_batch();
    let dims = [batch, Dim::Fixed(3), Dim::Fixed(5), Dim::Fixed(4)];
    let x = net.add_input("x", DType::F32, &dims).unwrap();
    let all = net
        .add(
            "shape",
            Shape {
                start: 0,
                end: None,
            },
            &[x],
        )
        .unwrap();
    let dim = |net: &mut NetworkDefinition, name: &str, d: Option<usize>| match d {
        Some(d) => net
            .add(
                name,
                Slice {
                    starts: vec![d as i64],
                    ends: vec![d as i64 + 1],
                    axes: vec![0],
                    steps: vec![1],
                },
                &[all],
            )
            .unwrap(),
        None => net
            .add_constant(name, Tensor::from_vec(&[1], vec![-1i64]).unwrap())
            .unwrap(),
    };
    let shape = |net: &mut NetworkDefinition, name: &str, dims: &[Option<usize>]| {
        let parts: Vec<_> = dims
            .iter()
            .enumerate()
            .map(|(i, &d)| dim(net, &format!("{name}{i}"), d))
            .collect();
        net.add(name, Concat { axis: 0 }, &parts).unwrap()
    };
    let first = shape(&mut net, "first", &[None, Some(2), Some(3)]);
    let r = net.add("merge", Reshape::new(vec![]), &[x, first]).unwrap();
    let t = net
        .add(
            "swap",
            Transpose {
                perm: vec![0, 2, 1],
            },
            &[r],
        )
        .unwrap();
    let last = shape(&mut net, "last", &last);
    let y = net.add("split", Reshape::new(vec![]), &[t, last]).unwrap();
    net.mark_output(y, "y").unwrap();
    net
}

#[test]
fn a_transpose_through_reshapes_becomes_one_transpose() {
    let x = Tensor::from_vec(&[2, 3, 5, 4], random_f32(120, 90)).unwrap();
    let xs = x.as_slice::<f32>().unwrap();
    let swapped: Vec<f32> = (0..120)
        .map(|i| {
            let (outer, w, h) = (i / 20, (i % 20) / 5, i % 5);
            xs[outer * 20 + h * 4 + w]
        })
        .collect();
    let forms = [
        ([Some(0), Some(1), Some(3), Some(2)], true),
        ([Some(0), None, Some(3), Some(2)], true),
        ([Some(0), Some(1), Some(2), Some(3)], false),
    ];
    for (last, transposes) in forms {
        let engine =
            torchtrt::compile(&reshaped_transpose_network(last), &BuildConfig::default()).unwrap();
        let ks = kinds(&engine);
        assert_eq!(!ks.contains(&"Reshape"), transposes, "{last:?}: {ks:?}");
        let y = engine.create_context().unwrap().execute(&[&x]).unwrap();
        if transposes {
            assert_eq!(y[0].shape(), [2, 3, 4, 5]);
            assert_eq!(y[0].as_slice::<f32>().unwrap(), swapped, "{last:?}");
        } else {
            let flat: Vec<f32> = (0..6)
                .flat_map(|o| (0..4).flat_map(move |w| (0..5).map(move |h| (o, w, h))))
                .map(|(o, w, h)| xs[o * 20 + h * 4 + w])
                .collect();
            assert_eq!(y[0].shape(), [2, 3, 5, 4]);
            assert_eq!(y[0].as_slice::<f32>().unwrap(), flat, "{last:?}");
        }
    }
}

/// 40 residual blocks `t + Slice(t)` under a dynamic batch: broadcasting joins the batch dim
/// with the slice's length, an expression that only equals it at run time, into `max(a, b)`,
/// and each block nests both (2⁴⁰ nodes unbounded). Dims past `MOST_DIM_NODES` become
/// run-time symbols: the build is quick and every dim small, and the engine runs.
#[test]
fn dims_that_double_with_every_block_stay_bounded() {
    let mut net = NetworkDefinition::new();
    let batch = dynamic_batch();
    let mut t = net
        .add_input("x", DType::F32, &[batch, Dim::Fixed(3)])
        .unwrap();
    for i in 0..40 {
        let s = net
            .add(
                &format!("slice{i}"),
                Slice {
                    starts: vec![0],
                    ends: vec![i64::MAX],
                    axes: vec![0],
                    steps: vec![1],
                },
                &[t],
            )
            .unwrap();
        t = net
            .add(
                &format!("add{i}"),
                Elementwise::new(ElementwiseOp::Add),
                &[t, s],
            )
            .unwrap();
    }
    net.mark_output(t, "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let longest = engine
        .tensor_types()
        .iter()
        .flat_map(|ty| ty.shape.iter().map(|d| d.to_string().len()))
        .max()
        .unwrap();
    assert!(longest < 20_000, "a dim printed as {longest} bytes");
    let x = Tensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 0.5, 3.0, 0.25, -1.0]).unwrap();
    let y = engine.create_context().unwrap().execute(&[&x]).unwrap();
    let want: Vec<f32> = x
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|v| v * 2f32.powi(40))
        .collect();
    assert_eq!(y[0].as_slice::<f32>().unwrap(), want);
}

/// A 3×3 convolution of `x` (`[n, 4, 5, 5]`) to four channels with padding 1, seeded
/// weights: its output has `x`'s shape.
fn same_padded_conv(net: &mut NetworkDefinition, x: TensorId) -> TensorId {
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[4, 4, 3, 3], random_f32(144, 21)).unwrap(),
        )
        .unwrap();
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    net.add("conv", conv, &[x, w]).unwrap()
}

/// `Conv(x) + Reshape(x, Shape(x))`: the builder's shape arithmetic knows the reshape keeps
/// `x`'s shape and fuses the sum into the convolution as its residual; the plan read back
/// (at the end of the build and when an engine is loaded), which names the reshape's dims
/// after the reshape, still takes the residual, and the engine adds it.
#[test]
fn a_residual_whose_shape_only_shape_arithmetic_knows_fuses_and_reloads() {
    let dims = [
        Dim::dynamic("n", 1, 2, 4),
        Dim::Fixed(4),
        Dim::Fixed(5),
        Dim::Fixed(5),
    ];
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F32, &dims).unwrap();
    let c = same_padded_conv(&mut net, x);
    let shape = net.add("shape", Shape::default(), &[x]).unwrap();
    let r = net.add("reshape", Reshape::default(), &[x, shape]).unwrap();
    let y = net
        .add("sum", Elementwise::new(ElementwiseOp::Add), &[c, r])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    let convs: Vec<usize> = engine
        .plan()
        .layers
        .iter()
        .filter(|l| l.kind.op().kind() == "Convolution")
        .map(|l| l.inputs.len())
        .collect();
    assert_eq!(convs, [4], "{:?}", kinds(&engine));
    let xs = random_f32(3 * 100, 22);
    let input = Tensor::from_vec(&[3, 4, 5, 5], xs.clone()).unwrap();
    let got = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&engine.serialize())
        .unwrap()
        .create_context()
        .unwrap()
        .execute(&[&input])
        .unwrap();
    let mut plain = NetworkDefinition::new();
    let x = plain.add_input("x", DType::F32, &dims).unwrap();
    let c = same_padded_conv(&mut plain, x);
    plain.mark_output(c, "c").unwrap();
    let c = torchtrt::compile(&plain, &BuildConfig::default())
        .unwrap()
        .create_context()
        .unwrap()
        .execute(&[&input])
        .unwrap();
    let want: Vec<f32> = c[0]
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .zip(&xs)
        .map(|(c, x)| c + x)
        .collect();
    assert_close(got[0].as_slice::<f32>().unwrap(), &want, 1e-5, 1e-5);
}
