//! Builder fusions on the CPU backend: an activation after a convolution becomes the
//! convolution's epilogue unless something else reads the convolution's output, and the
//! result is the same as running the layers one by one.

use std::sync::Arc;

use torchtrt_core::layers::{Activation, ActivationKind, Convolution, Elementwise, ElementwiseOp};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, LayerKind, NetworkDefinition, Tensor, TensorId, build,
};
use torchtrt_cpu::CpuBackend;

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed) % 1000)
        .map(|v| v as f32 / 500.0 - 1.0)
        .collect()
}

/// A 3×3 convolution `conv` of `x` with padding 1, `[out, in]` channels, and constant
/// weights and bias drawn from `values` with the seeds `(weights, bias)`.
fn padded_conv_3x3(
    net: &mut NetworkDefinition,
    x: TensorId,
    [m, c]: [usize; 2],
    (w_seed, b_seed): (u32, u32),
) -> TensorId {
    let w = Tensor::from_vec(&[m, c, 3, 3], values(m * c * 9, w_seed)).unwrap();
    let w = net.add_constant("w", w).unwrap();
    let b = Tensor::from_vec(&[m], values(m, b_seed)).unwrap();
    let b = net.add_constant("b", b).unwrap();
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    net.add("conv", conv, &[x, w, b]).unwrap()
}

/// x → conv(3×3, pad 1) → relu → y; with `tap`, the conv output is also an output.
fn network(tap: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[1, 3, 6, 7].map(Dim::Fixed))
        .unwrap();
    let c = padded_conv_3x3(&mut net, x, [4, 3], (7, 3));
    let y = net
        .add(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[c],
        )
        .unwrap();
    net.mark_output(y, "y").unwrap();
    if tap {
        let two = net
            .add_constant("two", Tensor::from_vec(&[1], vec![2f32]).unwrap())
            .unwrap();
        let z = net
            .add("double", Elementwise::new(ElementwiseOp::Mul), &[c, two])
            .unwrap();
        net.mark_output(z, "z").unwrap();
    }
    net
}

fn run(tap: bool, fuse_expected: bool) -> Vec<Tensor> {
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let engine = build(&network(tap), &BuildConfig::default(), &backends).unwrap();
    let activations = engine
        .plan()
        .layers
        .iter()
        .filter(|l| matches!(l.kind, LayerKind::Activation(_)))
        .count();
    assert_eq!(activations == 0, fuse_expected, "fused: {fuse_expected}");
    let x = Tensor::from_vec(&[1, 3, 6, 7], values(126, 11)).unwrap();
    engine.create_context().unwrap().execute(&[&x]).unwrap()
}

#[test]
fn relu_fuses_into_its_convolution_and_gives_the_same_result() {
    let fused = run(false, true);
    let separate = run(true, false);
    let y = fused[0].as_slice::<f32>().unwrap();
    assert_eq!(y, separate[0].as_slice::<f32>().unwrap());
    assert!(y.iter().all(|&v| v >= 0.0) && y.iter().any(|&v| v > 0.0));
    let z = separate[1].as_slice::<f32>().unwrap();
    assert!(
        z.iter().any(|&v| v < 0.0),
        "the tapped output is before the relu"
    );
    for (a, b) in y.iter().zip(z) {
        assert_eq!(*a, (b / 2.0).max(0.0));
    }
}

/// x · s + t → relu with per-channel constants (exported BatchNormalization with no
/// convolution before it) becomes one depthwise convolution; a scalar `Mul` stays.
#[test]
fn per_channel_affine_and_relu_become_one_convolution() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2, 3, 4, 5].map(Dim::Fixed))
        .unwrap();
    let constant = |net: &mut NetworkDefinition, name: &str, shape: &[usize], v: Vec<f32>| {
        net.add_constant(name, Tensor::from_vec(shape, v).unwrap())
            .unwrap()
    };
    let s = constant(&mut net, "s", &[1, 3, 1, 1], vec![0.5, -2.0, 1.5]);
    let t = constant(&mut net, "t", &[3, 1, 1], vec![0.25, 1.0, -0.75]);
    let k = constant(&mut net, "k", &[1], vec![3.0]);
    let scaled = net
        .add("mul", Elementwise::new(ElementwiseOp::Mul), &[x, s])
        .unwrap();
    let shifted = net
        .add("add", Elementwise::new(ElementwiseOp::Add), &[scaled, t])
        .unwrap();
    let y = net
        .add(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[shifted],
        )
        .unwrap();
    let z = net
        .add("triple", Elementwise::new(ElementwiseOp::Mul), &[x, k])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    net.mark_output(z, "z").unwrap();
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let engine = build(&net, &BuildConfig::default(), &backends).unwrap();
    let kinds: Vec<&str> = engine
        .plan()
        .layers
        .iter()
        .filter(|l| !matches!(l.kind, LayerKind::Constant(_)))
        .map(|l| l.kind.op().kind())
        .collect();
    assert_eq!(kinds, ["Convolution", "Elementwise"]);
    let xv = values(120, 5);
    let input = Tensor::from_vec(&[2, 3, 4, 5], xv.clone()).unwrap();
    let outs = engine.create_context().unwrap().execute(&[&input]).unwrap();
    let (sv, tv) = ([0.5f32, -2.0, 1.5], [0.25f32, 1.0, -0.75]);
    let want: Vec<f32> = xv
        .iter()
        .enumerate()
        .map(|(i, v)| (v * sv[(i / 20) % 3] + tv[(i / 20) % 3]).max(0.0))
        .collect();
    assert_eq!(outs[0].as_slice::<f32>().unwrap(), want.as_slice());
    let tripled: Vec<f32> = xv.iter().map(|v| v * 3.0).collect();
    assert_eq!(outs[1].as_slice::<f32>().unwrap(), tripled.as_slice());
}

/// x → conv a (3×3, pad 1, no bias) and x → conv b (1×1 with bias, the shortcut) → a + b →
/// relu → y; the shortcut runs before or after conv a; with `tap`, both convolutions' outputs
/// are also outputs (so nothing fuses). With `swap`, the `Add` reads the shortcut first.
fn residual_network(shortcut_first: bool, swap: bool, tap: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2, 4, 9, 11].map(Dim::Fixed))
        .unwrap();
    let wa = net
        .add_constant(
            "wa",
            Tensor::from_vec(&[6, 4, 3, 3], values(216, 5)).unwrap(),
        )
        .unwrap();
    let wb = net
        .add_constant(
            "wb",
            Tensor::from_vec(&[6, 4, 1, 1], values(24, 9)).unwrap(),
        )
        .unwrap();
    let bb = net
        .add_constant("bb", Tensor::from_vec(&[6], values(6, 13)).unwrap())
        .unwrap();
    let mut conv = Convolution::new(2);
    conv.pads_begin = vec![1, 1];
    conv.pads_end = vec![1, 1];
    let shortcut = |net: &mut NetworkDefinition| {
        net.add("shortcut", Convolution::new(2), &[x, wb, bb])
            .unwrap()
    };
    let early = shortcut_first.then(|| shortcut(&mut net));
    let a = net.add("conv_a", conv, &[x, wa]).unwrap();
    let b = early.unwrap_or_else(|| shortcut(&mut net));
    let operands = if swap { [b, a] } else { [a, b] };
    let sum = net
        .add("add", Elementwise::new(ElementwiseOp::Add), &operands)
        .unwrap();
    let y = net
        .add(
            "relu",
            Activation {
                kind: ActivationKind::Relu,
            },
            &[sum],
        )
        .unwrap();
    net.mark_output(y, "y").unwrap();
    if tap {
        net.mark_output(a, "a").unwrap();
        net.mark_output(b, "b").unwrap();
    }
    net
}

#[test]
fn residual_add_and_relu_fuse_into_the_convolution_and_give_the_same_result() {
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let x = Tensor::from_vec(&[2, 4, 9, 11], values(792, 17)).unwrap();
    for (shortcut_first, swap) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut results = Vec::new();
        for tap in [false, true] {
            let net = residual_network(shortcut_first, swap, tap);
            let engine = build(&net, &BuildConfig::default(), &backends).unwrap();
            let kinds: Vec<&str> = engine
                .plan()
                .layers
                .iter()
                .filter(|l| !matches!(l.kind, LayerKind::Constant(_)))
                .map(|l| l.kind.op().kind())
                .collect();
            let residual = engine
                .plan()
                .layers
                .iter()
                .filter(|l| matches!(l.kind, LayerKind::Convolution(_)) && l.inputs.len() == 4)
                .count();
            if tap {
                assert_eq!(residual, 0, "{kinds:?}");
                assert!(kinds.contains(&"Elementwise"), "{kinds:?}");
            } else {
                assert_eq!(
                    kinds,
                    ["Convolution", "Convolution"],
                    "{shortcut_first} {swap}"
                );
                assert_eq!(residual, 1);
            }
            let outs = engine.create_context().unwrap().execute(&[&x]).unwrap();
            results.push(outs[0].as_slice::<f32>().unwrap().to_vec());
        }
        let (fused, separate) = (&results[0], &results[1]);
        assert_eq!(fused.len(), 2 * 6 * 9 * 11);
        for (f, s) in fused.iter().zip(separate) {
            assert!((f - s).abs() <= 1e-5 * s.abs().max(1.0), "{f} vs {s}");
        }
        assert!(fused.iter().all(|&v| v >= 0.0) && fused.iter().any(|&v| v > 0.0));
        assert!(fused.contains(&0.0));
    }
}

/// x[2,5,12] → MatMul with constant W[12,9] → + bias (`[9]` or `[1,1,9]`, on either side) → y;
/// with `tap`, the product is also an output (then nothing fuses).
fn linear_network(bias_shape: &[usize], bias_first: bool, tap: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2, 5, 12].map(Dim::Fixed))
        .unwrap();
    let w = net
        .add_constant("w", Tensor::from_vec(&[12, 9], values(108, 5)).unwrap())
        .unwrap();
    let b = net
        .add_constant("b", Tensor::from_vec(bias_shape, values(9, 9)).unwrap())
        .unwrap();
    let m = net
        .add("mm", torchtrt_core::layers::MatMul::default(), &[x, w])
        .unwrap();
    let pair = if bias_first { [b, m] } else { [m, b] };
    let y = net
        .add("bias", Elementwise::new(ElementwiseOp::Add), &pair)
        .unwrap();
    net.mark_output(y, "y").unwrap();
    if tap {
        net.mark_output(m, "m").unwrap();
    }
    net
}

#[test]
fn a_constant_bias_add_fuses_into_the_matmul_and_gives_the_same_result() {
    let x = Tensor::from_vec(&[2, 5, 12], values(120, 13)).unwrap();
    let (w, bias) = (values(108, 5), values(9, 9));
    let mut want = vec![0f64; 90];
    for (r, row) in want.chunks_mut(9).enumerate() {
        for (j, y) in row.iter_mut().enumerate() {
            *y = f64::from(bias[j])
                + (0..12)
                    .map(|k| {
                        f64::from(x.as_slice::<f32>().unwrap()[r * 12 + k])
                            * f64::from(w[k * 9 + j])
                    })
                    .sum::<f64>();
        }
    }
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    for (shape, first, tap) in [
        (&[9][..], false, false),
        (&[1, 1, 9][..], true, false),
        (&[9][..], false, true),
    ] {
        let engine = build(
            &linear_network(shape, first, tap),
            &BuildConfig::default(),
            &backends,
        )
        .unwrap();
        let adds = engine
            .plan()
            .layers
            .iter()
            .filter(|l| matches!(l.kind, LayerKind::Elementwise(_)))
            .count();
        assert_eq!(adds, usize::from(tap), "{shape:?} first {first} tap {tap}");
        let got = engine.create_context().unwrap().execute(&[&x]).unwrap();
        for (g, w) in got[0].as_slice::<f32>().unwrap().iter().zip(&want) {
            assert!((f64::from(*g) - w).abs() < 1e-5, "{g} vs {w}");
        }
    }
}

/// A MatMul with a bias input, and with a residual after it (what a GPU engine's fused
/// linear layer is when it falls back to the host), adds them in the layer's dtype: f32,
/// f16 and bf16 against the f32 product.
#[test]
fn a_matmul_bias_input_is_added_in_every_float_precision() {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[3, 4, 20].map(Dim::Fixed))
        .unwrap();
    let w = net
        .add_constant("w", Tensor::from_vec(&[20, 6], values(120, 3)).unwrap())
        .unwrap();
    let b = net
        .add_constant("b", Tensor::from_vec(&[6], values(6, 8)).unwrap())
        .unwrap();
    let r = net
        .add_constant("r", Tensor::from_vec(&[3, 4, 6], values(72, 21)).unwrap())
        .unwrap();
    let y = net
        .add("mm", torchtrt_core::layers::MatMul::default(), &[x, w, b])
        .unwrap();
    let z = net
        .add(
            "mm_r",
            torchtrt_core::layers::MatMul::default(),
            &[x, w, b, r],
        )
        .unwrap();
    net.mark_output(y, "y").unwrap();
    net.mark_output(z, "z").unwrap();
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let input = Tensor::from_vec(&[3, 4, 20], values(240, 17)).unwrap();
    let (w, bias, xs) = (
        values(120, 3),
        values(6, 8),
        input.as_slice::<f32>().unwrap(),
    );
    for (precision, tol) in [(DType::F32, 1e-5), (DType::F16, 2e-2), (DType::BF16, 8e-2)] {
        let config = BuildConfig {
            precision,
            ..BuildConfig::default()
        };
        let engine = build(&net, &config, &backends).unwrap();
        let got = engine.create_context().unwrap().execute(&[&input]).unwrap();
        let residual = values(72, 21);
        let (plain, summed) = (got[0].to_f64_vec(), got[1].to_f64_vec());
        for (i, (g, s)) in plain.iter().zip(&summed).enumerate() {
            let (r, j) = (i / 6, i % 6);
            let want = f64::from(bias[j])
                + (0..20)
                    .map(|k| f64::from(xs[r * 20 + k]) * f64::from(w[k * 6 + j]))
                    .sum::<f64>();
            let bound = |w: f64| tol * (1.0 + w.abs());
            assert!(
                (g - want).abs() <= bound(want),
                "{precision} [{i}]: {g} vs {want}"
            );
            let want = want + f64::from(residual[i]);
            assert!(
                (s - want).abs() <= bound(want),
                "{precision} [{i}]: {s} vs {want}"
            );
        }
    }
}

/// x → Sigmoid → Mul(x, s) (or Mul(s, x)), with `tap` also marking the sigmoid an output.
fn silu_network(sigmoid_first: bool, tap: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2, 3, 5, 7].map(Dim::Fixed))
        .unwrap();
    let y = silu_of(&mut net, x, sigmoid_first);
    net.mark_output(y.0, "y").unwrap();
    if tap {
        net.mark_output(y.1, "s").unwrap();
    }
    net
}

/// `Mul(x, Sigmoid(x))` added to `net`, the sigmoid first or second: (product, sigmoid).
fn silu_of(net: &mut NetworkDefinition, x: TensorId, sigmoid_first: bool) -> (TensorId, TensorId) {
    let s = net
        .add(
            "sigmoid",
            Activation {
                kind: ActivationKind::Sigmoid,
            },
            &[x],
        )
        .unwrap();
    let operands = if sigmoid_first { [s, x] } else { [x, s] };
    let y = net
        .add("silu", Elementwise::new(ElementwiseOp::Mul), &operands)
        .unwrap();
    (y, s)
}

/// x → 3×3 convolution (3 → 3 channels, padded) → c, then `Mul(c, Sigmoid(c))` when `silu`;
/// with `tap`, `c` is an output too.
fn conv_silu_network(silu: bool, tap: bool) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2, 3, 5, 7].map(Dim::Fixed))
        .unwrap();
    let c = padded_conv_3x3(&mut net, x, [3, 3], (5, 4));
    if silu {
        let (y, _) = silu_of(&mut net, c, true);
        net.mark_output(y, "y").unwrap();
    }
    if tap || !silu {
        net.mark_output(c, "c").unwrap();
    }
    net
}

/// The plan's layers but constants: an activation by its kind, a convolution with the
/// activation it applies, any other layer by its op.
fn plan_kinds(engine: &Engine) -> Vec<String> {
    engine
        .plan()
        .layers
        .iter()
        .map(|l| match &l.kind {
            LayerKind::Activation(a) => format!("{:?}", a.kind),
            LayerKind::Convolution(v) => format!("Convolution {:?}", v.activation),
            other => other.op().kind().to_string(),
        })
        .filter(|k| k != "Constant")
        .collect()
}

/// Each of `got` is silu of the same element of `x`, from f64, within 1e-6 (relative above
/// magnitude 1).
fn assert_silu(got: &[f32], x: &[f32], what: &str) {
    assert_eq!(got.len(), x.len(), "{what}");
    for (&got, &x) in got.iter().zip(x) {
        let x = f64::from(x);
        let want = x / (1.0 + (-x).exp());
        assert!(
            (f64::from(got) - want).abs() <= 1e-6 * want.abs().max(1.0),
            "silu({x}) = {got}, want {want} ({what})"
        );
    }
}

/// `Mul(x, Sigmoid(x))` in either order becomes one `Silu` activation, unless the sigmoid is
/// read elsewhere; each result is x · sigmoid(x) from f64.
#[test]
fn sigmoid_times_its_input_becomes_one_silu() {
    let xv: Vec<f32> = values(210, 9).iter().map(|v| v * 12.0).collect();
    let input = Tensor::from_vec(&[2, 3, 5, 7], xv.clone()).unwrap();
    for (sigmoid_first, tap) in [(false, false), (true, false), (false, true)] {
        let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
        let net = silu_network(sigmoid_first, tap);
        let engine = build(&net, &BuildConfig::default(), &backends).unwrap();
        let kinds = plan_kinds(&engine);
        let want: &[&str] = if tap {
            &["Sigmoid", "Elementwise"]
        } else {
            &["Silu"]
        };
        assert_eq!(kinds, want, "sigmoid first: {sigmoid_first}, tapped: {tap}");
        let outs = engine.create_context().unwrap().execute(&[&input]).unwrap();
        let what = format!("sigmoid first: {sigmoid_first}, tapped: {tap}");
        assert_silu(outs[0].as_slice::<f32>().unwrap(), &xv, &what);
    }
}

/// A SiLU written as `Mul(c, Sigmoid(c))` after a convolution becomes the convolution's
/// epilogue (one layer) when nothing else reads `c`, and a `Silu` layer after it when
/// something does; both give silu(c) of the convolution alone, from f64.
#[test]
fn silu_after_a_convolution_becomes_its_epilogue() {
    let input = Tensor::from_vec(
        &[2, 3, 5, 7],
        values(210, 13).iter().map(|v| v * 3.0).collect(),
    )
    .unwrap();
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let engine = |net: &NetworkDefinition| build(net, &BuildConfig::default(), &backends).unwrap();
    let alone = engine(&conv_silu_network(false, false));
    let c = alone.create_context().unwrap().execute(&[&input]).unwrap();
    let c = c[0].as_slice::<f32>().unwrap();
    assert!(c.iter().any(|&v| v < -1.0) && c.iter().any(|&v| v > 1.0));
    for tap in [false, true] {
        let fused = engine(&conv_silu_network(true, tap));
        let kinds = plan_kinds(&fused);
        let want: &[&str] = if tap {
            &["Convolution None", "Silu"]
        } else {
            &["Convolution Some(Silu)"]
        };
        assert_eq!(kinds, want, "tapped: {tap}");
        let outs = fused.create_context().unwrap().execute(&[&input]).unwrap();
        let what = format!("tapped: {tap}");
        assert_silu(outs[0].as_slice::<f32>().unwrap(), c, &what);
    }
}

/// How the scale after a linear layer is applied in [`scaled_linear_network`].
#[derive(Clone, Copy, Debug)]
enum Scale {
    /// `Mul(product, γ)` with γ of this shape.
    After(&'static [usize]),
    /// `Mul(γ, product)`, γ `[1, 1, 9]`.
    Before,
    /// `Div(product, γ)`, γ `[1]`.
    Divided,
    /// `Mul(product, γ)` with γ `[5, 1]`: one value per row, which does not fold.
    PerRow,
}

/// x[2,5,12] → MatMul with constant W ([12,9], or [9,12] read transposed) → + bias (when
/// `biased`) → scale → + r (an input) → y; with `tap`, the product is also an output.
/// Returns the network and γ's values.
fn scaled_linear_network(
    scale: Scale,
    [transposed, biased, tap]: [bool; 3],
) -> (NetworkDefinition, Vec<f32>) {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2, 5, 12].map(Dim::Fixed))
        .unwrap();
    let r = net
        .add_input("r", DType::F32, &[2, 5, 9].map(Dim::Fixed))
        .unwrap();
    let w_shape = if transposed { [9, 12] } else { [12, 9] };
    let w = net
        .add_constant("w", Tensor::from_vec(&w_shape, values(108, 5)).unwrap())
        .unwrap();
    let b = net
        .add_constant("b", Tensor::from_vec(&[9], values(9, 9)).unwrap())
        .unwrap();
    let product = torchtrt_core::layers::MatMul {
        transpose_b: transposed,
        ..Default::default()
    };
    let m = net.add("mm", product, &[x, w]).unwrap();
    let product = match biased {
        true => net
            .add("bias", Elementwise::new(ElementwiseOp::Add), &[m, b])
            .unwrap(),
        false => m,
    };
    let shape: &[usize] = match scale {
        Scale::After(s) => s,
        Scale::Before => &[1, 1, 9],
        Scale::Divided => &[1],
        Scale::PerRow => &[5, 1],
    };
    let n: usize = shape.iter().product();
    let gamma: Vec<f32> = values(n, 31).iter().map(|v| v + 1.5).collect();
    let g = net
        .add_constant("gamma", Tensor::from_vec(shape, gamma.clone()).unwrap())
        .unwrap();
    let (op, pair) = match scale {
        Scale::Before => (ElementwiseOp::Mul, [g, product]),
        Scale::Divided => (ElementwiseOp::Div, [product, g]),
        _ => (ElementwiseOp::Mul, [product, g]),
    };
    let scaled = net.add("scale", Elementwise::new(op), &pair).unwrap();
    let y = net
        .add(
            "residual",
            Elementwise::new(ElementwiseOp::Add),
            &[scaled, r],
        )
        .unwrap();
    net.mark_output(y, "y").unwrap();
    if tap {
        net.mark_output(product, "m").unwrap();
    }
    (net, gamma)
}

/// A constant scale per output column after a linear layer (ConvNeXt's layer scale) folds
/// into the layer's weights and bias, whichever side of the `Mul` it is on, as a divisor,
/// by one value or one per column, with W read transposed or not, in f32 and f16 (the CPU
/// fuses a bias in f32 only: an f16 bias `Add` stays between the product and its scale); a
/// scale per row, or a product something else reads, stays a layer. Each result is checked
/// against the f64 reference.
#[test]
fn a_scale_per_column_after_a_linear_layer_folds_into_its_weights() {
    let x = values(120, 13);
    let r = values(90, 17);
    let (w, bias) = (values(108, 5), values(9, 9));
    let inputs = [
        Tensor::from_vec(&[2, 5, 12], x.clone()).unwrap(),
        Tensor::from_vec(&[2, 5, 9], r.clone()).unwrap(),
    ];
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let cases = [
        (Scale::After(&[9]), [false, true, false], true),
        (Scale::After(&[9]), [false, false, false], true),
        (Scale::After(&[1, 1, 9]), [true, true, false], true),
        (Scale::Before, [false, false, false], true),
        (Scale::Divided, [true, true, false], true),
        (Scale::After(&[1]), [true, false, false], true),
        (Scale::After(&[9]), [false, true, true], false),
        (Scale::After(&[9]), [false, false, true], false),
        (Scale::PerRow, [false, false, false], false),
    ];
    for (scale, flags @ [transposed, biased, _], folds) in cases {
        let (net, gamma) = scaled_linear_network(scale, flags);
        for (precision, tol) in [(DType::F32, 1e-5), (DType::F16, 2e-2)] {
            let folds = folds && !(biased && precision == DType::F16);
            let what = format!("{scale:?} {flags:?} {precision}");
            let config = BuildConfig {
                precision,
                ..BuildConfig::default()
            };
            let engine = build(&net, &config, &backends).unwrap();
            let kinds = plan_kinds(&engine);
            let scales = engine
                .plan()
                .layers
                .iter()
                .filter(|l| l.name == "scale")
                .count();
            assert_eq!(scales == 0, folds, "{what}: {kinds:?}");
            let got = engine
                .create_context()
                .unwrap()
                .execute(&[&inputs[0], &inputs[1]]);
            let y = got.unwrap()[0].to_f64_vec();
            for (i, g) in y.iter().enumerate() {
                let (row, j) = (i / 9, i % 9);
                let wk = |k: usize| match transposed {
                    true => w[j * 12 + k],
                    false => w[k * 9 + j],
                };
                let product = f64::from(if biased { bias[j] } else { 0.0 })
                    + (0..12)
                        .map(|k| f64::from(x[row * 12 + k]) * f64::from(wk(k)))
                        .sum::<f64>();
                let s = f64::from(match scale {
                    Scale::After(&[9]) | Scale::After(&[1, 1, 9]) | Scale::Before => gamma[j],
                    Scale::PerRow => gamma[row % 5],
                    _ => gamma[0],
                });
                let scaled = match scale {
                    Scale::Divided => product / s,
                    _ => product * s,
                };
                let want = scaled + f64::from(r[i]);
                assert!(
                    (g - want).abs() <= tol * (1.0 + want.abs()),
                    "{what} [{i}]: {g} vs {want}"
                );
            }
        }
    }
}
