//! The builder's layout pass: the chains of convolutions a backend prefers channels last get
//! channels-last edges, with a reformat only where a tensor changes layout; an engine built
//! so computes what the channels-first one does, survives serialization, and `inspect`
//! counts its reformats.

mod common;

use std::sync::Arc;

use common::{assert_close, random_f32};
use torchtrt::layers::{
    Activation, ActivationKind, Convolution, Elementwise, ElementwiseOp, InferInput, LayerKind,
    MatMul, OutputQuantization, Quantize, QuantizedConvolution, Reduce, ReduceOp, Softmax,
    Transpose,
};
use torchtrt::plugin_api::{DType, DeviceKind};
use torchtrt::{
    Backend, BuildConfig, ChannelsLast, CpuBackend, Dim, Engine, Kernel, NetworkDefinition, Tensor,
};

/// The CPU backend, running depthwise convolutions either way and preferring channels last
/// for every other convolution of more than three input channels and every 8-bit one (the
/// CPU runs those through its channels-first kernels with transposes around).
struct ChannelsLastCpu(CpuBackend);

impl Backend for ChannelsLastCpu {
    fn device(&self) -> DeviceKind {
        self.0.device()
    }
    fn name(&self) -> String {
        "cpu (channels last)".into()
    }
    fn prepare(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        self.0.prepare(layer, inputs)
    }
    fn channels_last(&self, layer: &Convolution, inputs: &[InferInput<'_>]) -> ChannelsLast {
        match inputs[0].shape[1].as_const() {
            Some(c) if layer.groups > 1 && layer.groups == c => ChannelsLast::Either,
            Some(c) if c > 3 && layer.groups == 1 => ChannelsLast::Faster,
            _ => ChannelsLast::No,
        }
    }
    fn quantized_channels_last(
        &self,
        _layer: &QuantizedConvolution,
        _inputs: &[InferInput<'_>],
    ) -> ChannelsLast {
        ChannelsLast::Faster
    }
}

fn conv(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    [m, c, k]: [usize; 3],
    stride: i64,
    seed: u64,
) -> torchtrt::TensorId {
    grouped(net, name, x, [m, c, k], [stride, 1], seed)
}

/// A depthwise `k`×`k` convolution (stride 1, padded to keep the size) of `c` channels.
fn depthwise(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    [c, k]: [usize; 2],
    seed: u64,
) -> torchtrt::TensorId {
    grouped(net, name, x, [c, 1, k], [1, c as i64], seed)
}

/// A `k`×`k` convolution of `m` filters over `cg` channels each, with bias, padded to keep
/// the size at stride 1, at `[stride, groups]`.
fn grouped(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    [m, cg, k]: [usize; 3],
    [stride, groups]: [i64; 2],
    seed: u64,
) -> torchtrt::TensorId {
    let w = Tensor::from_vec(&[m, cg, k, k], random_f32(m * cg * k * k, seed)).unwrap();
    let w = net.add_constant(&format!("{name}_w"), w).unwrap();
    let b = Tensor::from_vec(&[m], random_f32(m, seed + 100)).unwrap();
    let b = net.add_constant(&format!("{name}_b"), b).unwrap();
    let mut layer = Convolution::new(2);
    let pad = (k as i64 - 1) / 2;
    layer.pads_begin = vec![pad; 2];
    layer.pads_end = vec![pad; 2];
    layer.strides = vec![stride; 2];
    layer.groups = groups;
    net.add(name, layer, &[x, w, b]).unwrap()
}

/// `x` permuted by `perm`.
fn transpose(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    perm: [usize; 4],
) -> torchtrt::TensorId {
    let perm = perm.to_vec();
    net.add(name, Transpose { perm }, &[x]).unwrap()
}

/// `x · s` for a constant per-channel scale `s [1, c, 1, 1]`.
fn scale(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    c: usize,
    seed: u64,
) -> torchtrt::TensorId {
    constant_operand(net, name, x, ElementwiseOp::Mul, [c, 1, 1], seed)
}

/// `x op s` for a constant `s [1, *dims]` broadcast over `x`.
fn constant_operand(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    op: ElementwiseOp,
    dims: [usize; 3],
    seed: u64,
) -> torchtrt::TensorId {
    let shape = [1, dims[0], dims[1], dims[2]];
    let s = Tensor::from_vec(&shape, random_f32(dims.iter().product(), seed)).unwrap();
    let s = net.add_constant(&format!("{name}_s"), s).unwrap();
    net.add(name, Elementwise::new(op), &[x, s]).unwrap()
}

/// Input `x`: `[n, channels, side, side]` f32 images, `n` dynamic (1 to 3, optimum 2).
fn images(net: &mut NetworkDefinition, channels: i64, side: i64) -> torchtrt::TensorId {
    let n = Dim::dynamic("n", 1, 2, 3);
    let dims = [n, Dim::Fixed(channels), Dim::Fixed(side), Dim::Fixed(side)];
    net.add_input("x", DType::F32, &dims).unwrap()
}

fn relu(net: &mut NetworkDefinition, name: &str, x: torchtrt::TensorId) -> torchtrt::TensorId {
    net.add(
        name,
        Activation {
            kind: ActivationKind::Relu,
        },
        &[x],
    )
    .unwrap()
}

/// A stem of three input channels to `c` (channels first), then three convolutions in a chain with
/// a residual shortcut, one convolution alone beside them, and a non-convolution reader of
/// the chain's first output: outputs `y` (end of the chain), `side` (the lone convolution)
/// and `tap` (the first output, doubled).
fn network(c: usize) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = images(&mut net, 3, 9);
    let stem = conv(&mut net, "stem", x, [c, 3, 3], 1, 1);
    let stem = relu(&mut net, "stem_relu", stem);
    let a = conv(&mut net, "a", stem, [c, c, 3], 1, 2);
    let a = relu(&mut net, "a_relu", a);
    let b = conv(&mut net, "b", a, [c, c, 1], 1, 3);
    let sum = net
        .add("shortcut", Elementwise::new(ElementwiseOp::Add), &[b, a])
        .unwrap();
    let sum = relu(&mut net, "shortcut_relu", sum);
    let y = conv(&mut net, "c", sum, [2 * c, c, 3], 2, 4);
    let side = conv(&mut net, "side", stem, [4, c, 1], 1, 5);
    let tap = net
        .add("tap", Elementwise::new(ElementwiseOp::Add), &[a, a])
        .unwrap();
    net.mark_output(y, "y").unwrap();
    net.mark_output(side, "side").unwrap();
    net.mark_output(tap, "tap").unwrap();
    net
}

fn build(layouts: bool) -> Engine {
    let config = BuildConfig {
        layouts,
        ..BuildConfig::default()
    };
    let cpu: Arc<dyn Backend> = Arc::new(ChannelsLastCpu(CpuBackend::new()));
    torchtrt_core::build(&network(8), &config, &[cpu]).unwrap()
}

fn run(engine: &Engine, input: &Tensor) -> Vec<Tensor> {
    engine.create_context().unwrap().execute(&[input]).unwrap()
}

#[test]
fn chains_of_convolutions_run_channels_last_with_reformats_at_their_edges() {
    let engine = build(true);
    let plan = engine.plan();
    let channels_last: Vec<&str> = plan
        .layers
        .iter()
        .filter(|l| matches!(&l.kind, LayerKind::Convolution(c) if c.channels_last))
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(
        channels_last,
        ["a", "b", "c"],
        "the chain, not the stem nor the lone one"
    );
    assert_eq!(
        plan.reformats.len(),
        3,
        "into the chain, and out of it for `tap` and `y`: {:?}",
        plan.reformats
    );
    for name in &plan.reformats {
        let layer = plan.layers.iter().find(|l| &l.name == name).unwrap();
        assert!(matches!(layer.kind, LayerKind::Transpose(_)), "{name}");
    }
    let summary = engine.summary().to_string();
    assert!(
        summary.contains("layouts: 3 layer(s) run channels last, 3 reformat(s)"),
        "{summary}"
    );
    let plain = build(false);
    assert!(plain.plan().reformats.is_empty());
    for n in [1, 2, 3] {
        let input = Tensor::from_vec(&[n, 3, 9, 9], random_f32(n * 243, 7 + n as u64)).unwrap();
        let want = run(&plain, &input);
        let got = run(&engine, &input);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.shape(), w.shape());
            // The CPU runs `b` (1×1) natively channels last, summing in another order.
            assert_close(
                g.as_slice::<f32>().unwrap(),
                w.as_slice::<f32>().unwrap(),
                1e-5,
                1e-5,
            );
        }
    }
}

#[test]
fn channels_last_engines_survive_serialization() {
    let engine = build(true);
    let bytes = engine.serialize();
    let reloaded = torchtrt::Runtime::new()
        .unwrap()
        .deserialize(&bytes)
        .unwrap();
    assert_eq!(reloaded.plan().reformats, engine.plan().reformats);
    let input = Tensor::from_vec(&[2, 3, 9, 9], random_f32(486, 21)).unwrap();
    assert_eq!(run(&reloaded, &input), run(&engine, &input));
}

/// Whether any convolution of a network of `convs` in a chain (`[out, in, window]`) on a
/// 5×5 input of the first one's channels is built channels last.
fn any_channels_last(convs: &[[usize; 3]]) -> bool {
    let mut net = NetworkDefinition::new();
    let dims = [1, convs[0][1] as i64, 5, 5].map(Dim::Fixed);
    let mut t = net.add_input("x", DType::F32, &dims).unwrap();
    for (i, &c) in convs.iter().enumerate() {
        t = conv(&mut net, &format!("conv{i}"), t, c, 1, 9 + i as u64);
    }
    net.mark_output(t, "y").unwrap();
    let cpu: Arc<dyn Backend> = Arc::new(ChannelsLastCpu(CpuBackend::new()));
    let engine = torchtrt_core::build(&net, &BuildConfig::default(), &[cpu]).unwrap();
    let last = engine
        .plan()
        .layers
        .iter()
        .any(|l| matches!(&l.kind, LayerKind::Convolution(c) if c.channels_last));
    assert_eq!(last, !engine.plan().reformats.is_empty());
    last
}

#[test]
fn channels_last_only_where_its_reformats_move_less_than_the_copies_they_save() {
    assert!(!any_channels_last(&[[8, 8, 3]]), "one convolution alone");
    assert!(any_channels_last(&[[8, 8, 3], [8, 8, 1]]), "8 → 8 → 8");
    assert!(
        !any_channels_last(&[[8, 8, 3], [64, 8, 1]]),
        "8 → 8 → 64: the output's reformat outweighs both copies"
    );
    assert!(
        any_channels_last(&[[8, 8, 3], [8, 8, 3], [8, 8, 3], [16, 8, 1]]),
        "8 → 8 → 8 → 8 → 16: reformats of 8 and 16 channels, copies of 4 × 8"
    );
}

/// Two depthwise convolutions added, on inputs `[1, 8, 5, 5]` given channels first or (where
/// `nhwc`) as `[1, 5, 5, 8]` transposed to channels first: built with and without the layout
/// pass, returns whether the convolutions ran channels last and the transposes left.
fn two_depthwise(nhwc: [bool; 2]) -> (bool, usize) {
    let mut net = NetworkDefinition::new();
    let mut branches = Vec::new();
    for (i, last) in nhwc.into_iter().enumerate() {
        let x = if last {
            let x = net
                .add_input(&format!("x{i}"), DType::F32, &[1, 5, 5, 8].map(Dim::Fixed))
                .unwrap();
            transpose(&mut net, &format!("first{i}"), x, [0, 3, 1, 2])
        } else {
            net.add_input(&format!("x{i}"), DType::F32, &[1, 8, 5, 5].map(Dim::Fixed))
                .unwrap()
        };
        branches.push(depthwise(
            &mut net,
            &format!("dw{i}"),
            x,
            [8, 3],
            30 + i as u64,
        ));
    }
    let sum = net
        .add("sum", Elementwise::new(ElementwiseOp::Add), &branches)
        .unwrap();
    net.mark_output(sum, "y").unwrap();
    let cpu: Arc<dyn Backend> = Arc::new(ChannelsLastCpu(CpuBackend::new()));
    let engine = torchtrt_core::build(&net, &BuildConfig::default(), &[cpu]).unwrap();
    let plan = engine.plan();
    let last = plan
        .layers
        .iter()
        .any(|l| matches!(&l.kind, LayerKind::Convolution(c) if c.channels_last));
    let transposes = plan
        .layers
        .iter()
        .filter(|l| matches!(l.kind, LayerKind::Transpose(_)))
        .count();
    (last, transposes)
}

#[test]
fn transposes_a_group_takes_away_count_against_its_reformats() {
    assert_eq!(
        two_depthwise([true, false]),
        (false, 1),
        "one transpose spared against a reformat in and one out: stays channels first"
    );
    assert_eq!(
        two_depthwise([true, true]),
        (true, 1),
        "two transposes spared against one reformat out"
    );
}

#[test]
fn cuda_engines_run_chains_of_convolutions_channels_last() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let net = network(32);
    let config = BuildConfig {
        precision: DType::F16,
        ..BuildConfig::default()
    };
    let engine = torchtrt::compile_for(&net, &config, "cuda:0").unwrap();
    let summary = engine.summary();
    let last = summary.layers.iter().filter(|l| l.channels_last).count();
    let reformats = summary.layers.iter().filter(|l| l.reformat).count();
    assert_eq!((last, reformats), (3, 3), "{summary}");
    assert!(summary.layers.iter().all(|l| !l.host_fallback), "{summary}");
    let cpu = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    for n in [1, 3] {
        let input = Tensor::from_vec(&[n, 3, 9, 9], random_f32(n * 243, 40 + n as u64)).unwrap();
        let want = run(&cpu, &input);
        let got = run(&engine, &input);
        for (g, w) in got.iter().zip(&want) {
            let w = w.as_slice::<f32>().unwrap();
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_close(g.as_slice::<f32>().unwrap(), w, 1e-2 * scale, 1e-2);
        }
    }
}

/// Two ConvNeXt blocks on `[n, c, 6, 6]` images: a depthwise 7×7 convolution, a transpose
/// channels last, a linear layer over the channels and an activation, a transpose back, a
/// per-channel scale and the residual add. With `second`, as timm writes them: a second
/// linear layer after the activation, with a bias where `second` is `Some(true)`.
fn convnext_blocks(c: usize, second: Option<bool>) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let mut x = images(&mut net, c as i64, 6);
    let mm = MatMul {
        transpose_a: false,
        transpose_b: false,
    };
    for i in 0..2u64 {
        let name = |s: &str| format!("block{i}_{s}");
        let dw = depthwise(&mut net, &name("dw"), x, [c, 7], 60 + i);
        let t = transpose(&mut net, &name("to_last"), dw, [0, 2, 3, 1]);
        let w = Tensor::from_vec(&[c, c], random_f32(c * c, 70 + i)).unwrap();
        let w = net.add_constant(&name("w"), w).unwrap();
        let lin = net.add(&name("linear"), mm.clone(), &[t, w]).unwrap();
        let softmax = Softmax {
            axis: -1,
            log: false,
        };
        let mut act = net.add(&name("softmax"), softmax, &[lin]).unwrap();
        if let Some(biased) = second {
            let w = Tensor::from_vec(&[c, c], random_f32(c * c, 74 + i)).unwrap();
            let w = net.add_constant(&name("w2"), w).unwrap();
            act = net.add(&name("linear2"), mm.clone(), &[act, w]).unwrap();
            if biased {
                let add = ElementwiseOp::Add;
                act = constant_operand(&mut net, &name("bias"), act, add, [1, 1, c], 84 + i);
            }
        }
        let back = transpose(&mut net, &name("to_first"), act, [0, 3, 1, 2]);
        let scaled = scale(&mut net, &name("gamma"), back, c, 80 + i);
        x = net
            .add(
                &name("residual"),
                Elementwise::new(ElementwiseOp::Add),
                &[scaled, x],
            )
            .unwrap();
    }
    net.mark_output(x, "y").unwrap();
    net
}

#[test]
fn depthwise_blocks_lose_the_transposes_around_their_channels_last_layers() {
    let cpu = || -> Arc<dyn Backend> { Arc::new(ChannelsLastCpu(CpuBackend::new())) };
    let transposes = |plan: &torchtrt::EnginePlan| {
        plan.layers
            .iter()
            .filter(|l| matches!(l.kind, LayerKind::Transpose(_)))
            .count()
    };
    // Folding makes the per-channel scale a 1×1 depthwise convolution with the residual
    // fused (in f32); without it the scale stays an element-wise layer whose `[1, C, 1, 1]`
    // constant is retyped channels last. In f16 (no 1×1 convolution), timm's scale, which the
    // layout pass puts right after a second linear layer without bias, folds into that
    // layer's weights.
    let cases = [
        (None, true, DType::F32),
        (None, false, DType::F32),
        (Some(true), true, DType::F32),
        (Some(false), true, DType::F16),
    ];
    for (second, fold_constants, precision) in cases {
        let net = convnext_blocks(8, second);
        let config = |layouts| BuildConfig {
            layouts,
            fold_constants,
            precision,
            ..BuildConfig::default()
        };
        let engine = torchtrt_core::build(&net, &config(true), &[cpu()]).unwrap();
        let plan = engine.plan();
        let last: Vec<&str> = plan
            .layers
            .iter()
            .filter(|l| matches!(&l.kind, LayerKind::Convolution(c) if c.channels_last))
            .map(|l| l.name.as_str())
            .collect();
        for dw in ["block0_dw", "block1_dw"] {
            assert!(last.contains(&dw), "{dw} not among {last:?}");
        }
        assert_eq!(
            (transposes(plan), plan.reformats.len()),
            (2, 2),
            "the network's four transposes gone; one reformat in, one out: {:?}",
            plan.reformats
        );
        if second.is_some() {
            let elementwise: Vec<&str> = plan
                .layers
                .iter()
                .filter(|l| matches!(l.kind, LayerKind::Elementwise(_)))
                .map(|l| l.name.as_str())
                .collect();
            let left: &[&str] = match precision {
                DType::F32 => &[],
                _ => &["block0_residual", "block1_residual"],
            };
            assert_eq!(elementwise, left, "{precision}");
        }
        let plain = torchtrt_core::build(&net, &config(false), &[cpu()]).unwrap();
        assert_eq!(transposes(plain.plan()), 4);
        for n in [1, 3] {
            let input =
                Tensor::from_vec(&[n, 8, 6, 6], random_f32(n * 288, 90 + n as u64)).unwrap();
            let (got, want) = (run(&engine, &input), run(&plain, &input));
            assert_eq!(got[0].shape(), want[0].shape());
            let tol = if precision == DType::F16 { 1e-2 } else { 1e-5 };
            assert_close(
                &got[0]
                    .to_f64_vec()
                    .iter()
                    .map(|&v| v as f32)
                    .collect::<Vec<_>>(),
                &want[0]
                    .to_f64_vec()
                    .iter()
                    .map(|&v| v as f32)
                    .collect::<Vec<_>>(),
                tol,
                tol,
            );
        }
    }
}

#[test]
fn cuda_depthwise_blocks_run_channels_last_without_their_transposes() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    for (second, precision) in [None, Some(true)]
        .into_iter()
        .flat_map(|t| [(t, DType::F32), (t, DType::F16)])
    {
        let net = convnext_blocks(32, second);
        let cpu = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
        let config = BuildConfig {
            precision,
            ..BuildConfig::default()
        };
        let engine = torchtrt::compile_for(&net, &config, "cuda:0").unwrap();
        let plan = engine.plan();
        let depthwise_last = plan
            .layers
            .iter()
            .filter(|l| l.name.ends_with("_dw"))
            .all(|l| matches!(&l.kind, LayerKind::Convolution(c) if c.channels_last));
        let transposes = plan
            .layers
            .iter()
            .filter(|l| matches!(l.kind, LayerKind::Transpose(_)))
            .count();
        let summary = engine.summary();
        assert!(depthwise_last, "{summary}");
        assert_eq!(transposes, 2, "one reformat in, one out: {summary}");
        assert!(summary.layers.iter().all(|l| !l.host_fallback), "{summary}");
        if second.is_some() {
            let elementwise = plan
                .layers
                .iter()
                .filter(|l| matches!(l.kind, LayerKind::Elementwise(_)))
                .count();
            assert_eq!(
                (
                    plan.layers
                        .iter()
                        .filter(|l| l.name.ends_with("_linear2") && l.inputs.len() == 4)
                        .count(),
                    elementwise
                ),
                (2, 0),
                "the scale folded and the residual fused into the second linear layers: {summary}"
            );
        }
        for n in [1, 3] {
            let input =
                Tensor::from_vec(&[n, 32, 6, 6], random_f32(n * 1152, 95 + n as u64)).unwrap();
            let (got, want) = (run(&engine, &input), run(&cpu, &input));
            let (g, w) = (
                got[0].as_slice::<f32>().unwrap(),
                want[0].as_slice::<f32>().unwrap(),
            );
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            let tol = if precision == DType::F16 { 1e-2 } else { 1e-4 };
            assert_close(g, w, tol * scale, tol);
        }
    }
}

/// A deterministic stream of small random choices.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// A random network of convolutions (1×1 or 3×3, stride 1 or 2, 4–12 channels, with and
/// without a residual; depthwise 3×3), activations, adds of equal-shaped tensors, constants
/// broadcast per channel or per position, softmaxes over the channels between transposes to
/// channels last and back (the transposed tensor, a second transpose of the same input or
/// the softmax sometimes a network output too), and non-convolution readers, whose tensors
/// are picked at random as inputs of later layers and as network outputs.
fn random_network(seed: u64) -> NetworkDefinition {
    let mut dice = Dice(seed);
    let mut net = NetworkDefinition::new();
    let x = images(&mut net, 6, 8);
    let mut tensors = vec![(x, [6usize, 8])];
    let mut outputs = 0;
    for i in 0..12 {
        let (t, [c, side]) = tensors[dice.below(tensors.len())];
        let name = format!("l{i}");
        let made = match dice.below(9) {
            0..=2 => {
                let m = [4, 6, 8, 12][dice.below(4)];
                let k = [1, 3][dice.below(2)];
                let stride = if side >= 4 && dice.below(4) == 0 {
                    2
                } else {
                    1
                };
                let y = conv(&mut net, &name, t, [m, c, k], stride as i64, seed * 100 + i);
                let out = (side - 1) / stride + 1;
                let same: Vec<_> = tensors.iter().filter(|(_, s)| *s == [m, out]).collect();
                if !same.is_empty() && dice.below(2) == 0 {
                    let (r, _) = *same[dice.below(same.len())];
                    let sum = net
                        .add(
                            &format!("{name}_add"),
                            Elementwise::new(ElementwiseOp::Add),
                            &[y, r],
                        )
                        .unwrap();
                    (sum, [m, out])
                } else {
                    (y, [m, out])
                }
            }
            3 => (relu(&mut net, &name, t), [c, side]),
            4 => {
                let same: Vec<_> = tensors.iter().filter(|(_, s)| *s == [c, side]).collect();
                let (r, _) = *same[dice.below(same.len())];
                let sum = net
                    .add(&name, Elementwise::new(ElementwiseOp::Mul), &[t, r])
                    .unwrap();
                (sum, [c, side])
            }
            5 => (
                depthwise(&mut net, &name, t, [c, 3], seed * 100 + i),
                [c, side],
            ),
            6 => {
                let to_last = transpose(&mut net, &format!("{name}_last"), t, [0, 2, 3, 1]);
                let soft = Softmax {
                    axis: -1,
                    log: false,
                };
                let mid = net.add(&name, soft, &[to_last]).unwrap();
                let first = transpose(&mut net, &format!("{name}_first"), mid, [0, 3, 1, 2]);
                let tap = match dice.below(4) {
                    0 => Some(to_last),
                    1 => Some(transpose(
                        &mut net,
                        &format!("{name}_again"),
                        t,
                        [0, 2, 3, 1],
                    )),
                    2 => Some(mid),
                    _ => None,
                };
                if let Some(tap) = tap {
                    net.mark_output(tap, &format!("out{outputs}")).unwrap();
                    outputs += 1;
                }
                (first, [c, side])
            }
            7 => {
                let (op, dims) = match dice.below(3) {
                    0 => (ElementwiseOp::Mul, [c, 1, 1]),
                    1 => (ElementwiseOp::Sub, [c, 1, 1]),
                    _ => (ElementwiseOp::Add, [1, side, side]),
                };
                let made = constant_operand(&mut net, &name, t, op, dims, seed * 100 + i);
                (made, [c, side])
            }
            _ => {
                let tap = net
                    .add(&name, Elementwise::new(ElementwiseOp::Sub), &[t, t])
                    .unwrap();
                net.mark_output(tap, &format!("out{outputs}")).unwrap();
                outputs += 1;
                continue;
            }
        };
        tensors.push(made);
        if dice.below(4) == 0 {
            net.mark_output(made.0, &format!("out{outputs}")).unwrap();
            outputs += 1;
        }
    }
    let (last, _) = *tensors.last().unwrap();
    net.mark_output(last, &format!("out{outputs}")).unwrap();
    net
}

#[test]
fn random_networks_compute_the_same_channels_last() {
    let (mut converted, mut spared, mut retyped) = (0, 0, 0);
    for seed in 1..=80 {
        let net = random_network(seed);
        let cpu: Arc<dyn Backend> = Arc::new(ChannelsLastCpu(CpuBackend::new()));
        let config = BuildConfig {
            fold_constants: seed % 2 == 0,
            ..BuildConfig::default()
        };
        let engine = torchtrt_core::build(&net, &config, &[cpu]).unwrap();
        let plain = torchtrt_core::build(&net, &config, &[Arc::new(CpuBackend::new())]).unwrap();
        converted += usize::from(!engine.plan().reformats.is_empty());
        let own_transposes = |plan: &torchtrt::EnginePlan| {
            plan.layers
                .iter()
                .filter(|l| matches!(l.kind, LayerKind::Transpose(_)))
                .filter(|l| !plan.reformats.contains(&l.name))
                .count()
        };
        spared += usize::from(own_transposes(engine.plan()) < own_transposes(plain.plan()));
        retyped += usize::from(engine.plan().layers.iter().any(|l| {
            matches!(l.kind, LayerKind::Constant(_)) && l.name.ends_with("/channels_last")
        }));
        for n in [1, 3] {
            let input = Tensor::from_vec(&[n, 6, 8, 8], random_f32(n * 384, seed + 7)).unwrap();
            let (got, want) = (run(&engine, &input), run(&plain, &input));
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.shape(), w.shape(), "seed {seed}");
                assert_close(
                    g.as_slice::<f32>().unwrap(),
                    w.as_slice::<f32>().unwrap(),
                    1e-5,
                    1e-5,
                );
            }
        }
    }
    println!(
        "{converted} of 80 networks have a channels-last group, {spared} lose transposes, \
         {retyped} retype a constant"
    );
    assert!(
        retyped >= 2,
        "only {retyped} of 80 networks retyped a constant"
    );
    assert!(spared >= 6, "only {spared} of 80 networks lost a transpose");
    assert!(
        converted >= 20,
        "only {converted} of 80 networks had a channels-last group"
    );
}

/// Where `scripts/gen_onnx_node_tests.py` put the ONNX `light` networks (`TORCHTRT_ONNX_TESTS`
/// or `target/onnx-tests`, which `scripts/test` fills).
fn light_network(name: &str) -> std::path::PathBuf {
    let root = std::env::var_os("TORCHTRT_ONNX_TESTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/onnx-tests")
        });
    let path = root
        .join("light")
        .join(format!("light_{name}"))
        .join("model.onnx");
    assert!(
        path.exists(),
        "{} is missing: run scripts/gen_onnx_node_tests.py target/onnx-tests",
        path.display()
    );
    path
}

#[test]
fn light_networks_compute_the_same_channels_last() {
    let mut converted = 0;
    for name in [
        "resnet50",
        "densenet121",
        "inception_v1",
        "inception_v2",
        "squeezenet",
    ] {
        let options = torchtrt::onnx::ImportOptions::default();
        let net = torchtrt::onnx::import_file(light_network(name), torchtrt::registry(), &options)
            .unwrap();
        let cpu = || -> Arc<dyn Backend> { Arc::new(ChannelsLastCpu(CpuBackend::new())) };
        let config = |layouts| BuildConfig {
            layouts,
            ..BuildConfig::default()
        };
        let engine = torchtrt_core::build(&net, &config(true), &[cpu()]).unwrap();
        let plain = torchtrt_core::build(&net, &config(false), &[cpu()]).unwrap();
        converted += usize::from(!engine.plan().reformats.is_empty());
        let dims: Vec<usize> = net.inputs()[0]
            .dims
            .iter()
            .map(|d| d.range().1 as usize)
            .collect();
        let n = dims.iter().product();
        let input = Tensor::from_vec(&dims, random_f32(n, 17)).unwrap();
        let (got, want) = (run(&engine, &input), run(&plain, &input));
        for (g, w) in got.iter().zip(&want) {
            let w = w.as_slice::<f32>().unwrap();
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_close(g.as_slice::<f32>().unwrap(), w, 1e-5 * scale, 1e-4);
        }
    }
    assert!(
        converted >= 3,
        "only {converted} of 6 networks had a channels-last group"
    );
}

fn activation(
    net: &mut NetworkDefinition,
    name: &str,
    x: torchtrt::TensorId,
    kind: ActivationKind,
) -> torchtrt::TensorId {
    net.add(name, Activation { kind }, &[x]).unwrap()
}

/// EfficientNet's blocks: a stem (3 → `c`, 3×3), then `blocks`
/// inverted residual blocks: a 1×1 expansion with SiLU, a depthwise 3×3 with SiLU, a
/// squeeze-and-excitation gate (global average pool, 1×1, SiLU, 1×1, sigmoid, multiply),
/// a 1×1 projection and the shortcut; a global average pool ends it.
fn inverted_residual_blocks(c: usize, blocks: u64) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = images(&mut net, 3, 10);
    let mut x = conv(&mut net, "stem", x, [c, 3, 3], 1, 1);
    for i in 0..blocks {
        let name = |s: &str| format!("block{i}_{s}");
        let wide = 4 * c;
        let e = conv(&mut net, &name("expand"), x, [wide, c, 1], 1, 10 + i);
        let e = activation(&mut net, &name("expand_silu"), e, ActivationKind::Silu);
        let d = depthwise(&mut net, &name("dw"), e, [wide, 3], 20 + i);
        let d = activation(&mut net, &name("dw_silu"), d, ActivationKind::Silu);
        let pool = Reduce {
            op: ReduceOp::Mean,
            axes: vec![2, 3],
            keep_dims: true,
        };
        let s = net.add(&name("se_pool"), pool, &[d]).unwrap();
        let s = conv(&mut net, &name("se_reduce"), s, [c / 2, wide, 1], 1, 30 + i);
        let s = activation(&mut net, &name("se_silu"), s, ActivationKind::Silu);
        let s = conv(&mut net, &name("se_expand"), s, [wide, c / 2, 1], 1, 40 + i);
        let s = activation(&mut net, &name("se_gate"), s, ActivationKind::Sigmoid);
        let g = net
            .add(
                &name("se_mul"),
                Elementwise::new(ElementwiseOp::Mul),
                &[d, s],
            )
            .unwrap();
        let p = conv(&mut net, &name("project"), g, [c, wide, 1], 1, 50 + i);
        x = net
            .add(&name("add"), Elementwise::new(ElementwiseOp::Add), &[p, x])
            .unwrap();
    }
    let pool = Reduce {
        op: ReduceOp::Mean,
        axes: vec![-2, -1],
        keep_dims: true,
    };
    let y = net.add("head_pool", pool, &[x]).unwrap();
    net.mark_output(y, "y").unwrap();
    net
}

/// On the CPU backend itself (AVX-512): EfficientNet's blocks run channels last, their
/// pooling over the permuted axes, and so does the stem (its kernel of few input channels), with one
/// reformat in before it (a transpose of the 3-channel images) and one out after the
/// head's pooling (a reshape: `[N, 1, 1, C]` is `[N, C, 1, 1]`'s bytes),
/// and compute what the channels-first engine does; a ResNet-style chain of 3×3 and 1×1
/// layers stays channels first.
#[test]
fn cpu_runs_inverted_residual_blocks_channels_last() {
    if torchtrt_cpu::simd_level() != "v4" {
        println!("skipped: the CPU runs channels last on AVX-512 only");
        return;
    }
    let net = inverted_residual_blocks(8, 2);
    let config = |layouts| BuildConfig {
        layouts,
        ..BuildConfig::default()
    };
    let cpu = || -> Arc<dyn Backend> { Arc::new(CpuBackend::new()) };
    let engine = torchtrt_core::build(&net, &config(true), &[cpu()]).unwrap();
    let plan = engine.plan();
    let convs: Vec<(&str, bool)> = plan
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            LayerKind::Convolution(c) => Some((l.name.as_str(), c.channels_last)),
            _ => None,
        })
        .collect();
    assert!(convs.contains(&("stem", true)), "{convs:?}");
    for block in 0..2 {
        for layer in ["expand", "dw", "se_reduce", "se_expand"] {
            let name = format!("block{block}_{layer}");
            assert!(convs.contains(&(name.as_str(), true)), "{name}: {convs:?}");
        }
    }
    let pools: Vec<&Vec<i64>> = plan
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            LayerKind::Reduce(r) => Some(&r.axes),
            _ => None,
        })
        .collect();
    assert_eq!(
        pools,
        [&vec![1, 2]; 3],
        "pooled over H and W of [N, H, W, C]"
    );
    let mut reformats: Vec<(&str, &str)> = plan
        .layers
        .iter()
        .filter(|l| plan.reformats.contains(&l.name))
        .map(|l| (l.name.as_str(), l.kind.op().kind()))
        .collect();
    reformats.sort();
    assert_eq!(
        reformats,
        [
            ("head_pool/reformat_channels_first", "Reshape"),
            ("x/reformat_channels_last", "Transpose"),
        ],
        "the pooled [N, 1, 1, C] leaves as a view, the 3-channel images are moved"
    );
    let plain = torchtrt_core::build(&net, &config(false), &[cpu()]).unwrap();
    for n in [1, 3] {
        let input = Tensor::from_vec(&[n, 3, 10, 10], random_f32(n * 300, 5 + n as u64)).unwrap();
        let (got, want) = (run(&engine, &input), run(&plain, &input));
        assert_eq!(got[0].shape(), [n, 8, 1, 1]);
        assert_close(
            got[0].as_slice::<f32>().unwrap(),
            want[0].as_slice::<f32>().unwrap(),
            1e-5,
            1e-5,
        );
    }
    let resnet = network(8);
    let engine = torchtrt_core::build(&resnet, &config(true), &[cpu()]).unwrap();
    assert!(
        engine.plan().reformats.is_empty(),
        "no depthwise layer pays"
    );
}

/// An 8-bit convolution of `m` filters over `c` channels, `k`×`k` padded to keep the size,
/// f32 out (or bytes with `output`), with a fused Relu and `residual` when given.
fn quantized_conv(
    net: &mut NetworkDefinition,
    name: &str,
    inputs: [torchtrt::TensorId; 2],
    [m, c, k]: [usize; 3],
    output: Option<OutputQuantization>,
    seed: u64,
) -> torchtrt::TensorId {
    let [x, residual] = inputs;
    let weights: Vec<i8> = random_f32(m * c * k * k, seed)
        .iter()
        .map(|v| (v * 127.0).round() as i8)
        .collect();
    let w = Tensor::from_vec(&[m, c, k, k], weights).unwrap();
    let w = net.add_constant(&format!("{name}_w"), w).unwrap();
    let b = Tensor::from_vec(&[m], random_f32(m, seed + 100)).unwrap();
    let b = net.add_constant(&format!("{name}_b"), b).unwrap();
    let mut conv = Convolution::new(2);
    let pad = (k as i64 - 1) / 2;
    conv.pads_begin = vec![pad; 2];
    conv.pads_end = vec![pad; 2];
    conv.activation = Some(ActivationKind::Relu);
    let scales = random_f32(m, seed + 200);
    let layer = QuantizedConvolution {
        conv,
        input_scale: 0.02,
        input_zero_point: 0,
        weight_scales: scales.iter().map(|s| 0.002 + 0.001 * s.abs()).collect(),
        dtype: DType::F32,
        output,
    };
    let mut operands = vec![x, w, b];
    if residual != x {
        operands.push(residual);
    }
    net.add(name, layer, &operands).unwrap()
}

/// `x` quantized to signed bytes by one scale.
fn quantize(net: &mut NetworkDefinition, name: &str, x: torchtrt::TensorId) -> torchtrt::TensorId {
    let s = Tensor::from_vec(&[1], vec![0.02f32]).unwrap();
    let s = net.add_constant(&format!("{name}_scale"), s).unwrap();
    let q = Quantize {
        axis: 1,
        to: DType::I8,
    };
    net.add(name, q, &[x, s]).unwrap()
}

/// Images of `c` channels quantized, a 3×3 8-bit convolution writing bytes, a 1×1 one
/// writing floats, their output quantized again into a 3×3 one with that output as its
/// residual: output `y`.
fn int8_network(c: usize) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = images(&mut net, c as i64, 9);
    let q0 = quantize(&mut net, "q0", x);
    let bytes = OutputQuantization {
        dtype: DType::I8,
        scale: 0.02,
        zero_point: 0,
    };
    let a = quantized_conv(&mut net, "a", [q0, q0], [c, c, 3], Some(bytes), 1);
    let b = quantized_conv(&mut net, "b", [a, a], [c, c, 1], None, 2);
    let q1 = quantize(&mut net, "q1", b);
    let y = quantized_conv(&mut net, "d", [q1, b], [c, c, 3], None, 3);
    net.mark_output(y, "y").unwrap();
    net
}

#[test]
fn chains_of_8_bit_convolutions_and_their_quantizations_run_channels_last() {
    let build = |layouts: bool| {
        let config = BuildConfig {
            layouts,
            ..BuildConfig::default()
        };
        let cpu: Arc<dyn Backend> = Arc::new(ChannelsLastCpu(CpuBackend::new()));
        torchtrt_core::build(&int8_network(8), &config, &[cpu]).unwrap()
    };
    let engine = build(true);
    let plan = engine.plan();
    let last: Vec<&str> = plan
        .layers
        .iter()
        .filter(|l| matches!(&l.kind, LayerKind::QuantizedConvolution(q) if q.conv.channels_last))
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(last, ["a", "b", "d"]);
    assert_eq!(plan.reformats.len(), 2, "x in, y out: {:?}", plan.reformats);
    let q1 = plan.layers.iter().find(|l| l.name == "q1").unwrap();
    let b = plan.layers.iter().find(|l| l.name == "b").unwrap();
    assert_eq!(
        q1.inputs[0], b.outputs[0],
        "q1 reads b's channels-last output"
    );
    let summary = engine.summary();
    assert_eq!(summary.layers.iter().filter(|l| l.channels_last).count(), 3);
    let plain = build(false);
    assert!(plain.plan().reformats.is_empty());
    for n in [1, 3] {
        let input = Tensor::from_vec(&[n, 8, 9, 9], random_f32(n * 648, 50 + n as u64)).unwrap();
        assert_eq!(run(&engine, &input), run(&plain, &input), "batch {n}");
    }
}

#[test]
fn cuda_runs_8_bit_convolutions_channels_last() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let net = int8_network(64);
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), "cuda:0").unwrap();
    let summary = engine.summary();
    let last = summary.layers.iter().filter(|l| l.channels_last).count();
    let reformats = summary.layers.iter().filter(|l| l.reformat).count();
    assert_eq!((last, reformats), (3, 2), "{summary}");
    assert!(summary.layers.iter().all(|l| !l.host_fallback), "{summary}");
    let cpu = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
    for n in [1, 3] {
        let input = Tensor::from_vec(&[n, 64, 9, 9], random_f32(n * 5184, 60 + n as u64)).unwrap();
        let want = run(&cpu, &input);
        let got = run(&engine, &input);
        let w = want[0].as_slice::<f32>().unwrap();
        let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert_close(got[0].as_slice::<f32>().unwrap(), w, 2e-2 * scale, 1e-2);
    }
}
