//! Outputs sized by a count: the `NonMaxSuppression` plugin (ONNX and torchvision layouts,
//! f32 and f16) inside engines whose later layers read the selection, against a plain
//! greedy reference, on the CPU and (when present) on CUDA, through serialisation, with one
//! context running inputs of one shape whose selections differ in length; and a plugin
//! whose count exceeds its bound is a clear error.

mod common;

use torchtrt::plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, Launch, Plugin, PluginCreator, PluginKey,
    PluginResult, PortDesc, Registrar, ShapeExpr, SizedOutput, TensorFormat,
};
use torchtrt::{BuildConfig, Dim, Engine, NetworkDefinition, Tensor, layers};

/// Deterministic values in `[0, 1)`.
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    common::random_f32(n, seed)
        .into_iter()
        .map(|v| (v + 1.0) / 2.0)
        .collect()
}

/// Scores in steps of 0.1, so that many tie.
fn tied(v: Vec<f32>) -> Vec<f32> {
    v.into_iter().map(|x| (x * 10.0).floor() / 10.0).collect()
}

/// `b` batches of `n` boxes crowded into a small square, so that many overlap: two
/// opposite corners each, in either order (`[y1, x1, y2, x2]` with some flipped).
fn crowded_boxes(b: usize, n: usize, seed: u64) -> Vec<f32> {
    let u = uniform(b * n * 6, seed);
    u.chunks_exact(6)
        .flat_map(|r| {
            let (cy, cx) = (r[0] * 4.0, r[1] * 4.0);
            let (h, w) = (0.5 + r[2] * 2.0, 0.5 + r[3] * 2.0);
            let (y1, y2) = (cy - h / 2.0, cy + h / 2.0);
            let (x1, x2) = (cx - w / 2.0, cx + w / 2.0);
            if r[4] < 0.3 {
                [y2, x2, y1, x1]
            } else {
                [y1, x1, y2, x2]
            }
        })
        .collect()
}

/// The suppression's parameters, as the plugin's fields and for the reference.
#[derive(Clone, Copy, Debug)]
struct Params {
    max_out: i64,
    iou: f32,
    score: Option<f32>,
}

impl Params {
    fn fields(&self, layout: &str) -> FieldCollection {
        FieldCollection::new()
            .with("layout", layout)
            .with("max_output_boxes_per_class", self.max_out)
            .with("iou_threshold", self.iou)
            .with("score_threshold", self.score.unwrap_or(0.0))
            .with("use_score_threshold", i32::from(self.score.is_some()))
    }
}

/// Plain greedy suppression in f64 over boxes `[b, n, 4]` and scores `[b, c, n]`: the
/// selected `(batch, class, box)` triples in ONNX order.
fn reference(
    boxes: &[f32],
    scores: &[f32],
    (b, c, n): (usize, usize, usize),
    p: Params,
) -> Vec<[i64; 3]> {
    let corners = |i: usize| {
        let q: Vec<f64> = boxes[4 * i..4 * i + 4]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        [
            q[0].min(q[2]),
            q[1].min(q[3]),
            q[0].max(q[2]),
            q[1].max(q[3]),
        ]
    };
    let iou = |a: [f64; 4], z: [f64; 4]| {
        let h = (a[2].min(z[2]) - a[0].max(z[0])).max(0.0);
        let w = (a[3].min(z[3]) - a[1].max(z[1])).max(0.0);
        let inter = h * w;
        let union = (a[2] - a[0]) * (a[3] - a[1]) + (z[2] - z[0]) * (z[3] - z[1]) - inter;
        if inter <= 0.0 { 0.0 } else { inter / union }
    };
    let limit = if p.max_out < 0 {
        n
    } else {
        (p.max_out as usize).min(n)
    };
    let mut out = Vec::new();
    for batch in 0..b {
        for class in 0..c {
            let s = &scores[(batch * c + class) * n..(batch * c + class + 1) * n];
            let mut order: Vec<usize> = (0..n)
                .filter(|&i| p.score.is_none_or(|t| s[i] > t))
                .collect();
            order.sort_by(|&x, &y| s[y].total_cmp(&s[x]).then(x.cmp(&y)));
            let mut kept: Vec<usize> = Vec::new();
            for i in order {
                if kept.len() == limit {
                    break;
                }
                let a = corners(batch * n + i);
                if kept
                    .iter()
                    .all(|&k| iou(corners(batch * n + k), a) <= f64::from(p.iou))
                {
                    kept.push(i);
                    out.push([batch as i64, class as i64, i as i64]);
                }
            }
        }
    }
    out
}

/// An engine for `device`: ONNX-layout suppression of `dtype` boxes `[b, n, 4]` and scores
/// `[b, c, n]` (n dynamic), with two layers reading the selection: its shape and the
/// selection as f32 plus one.
fn onnx_engine(dtype: DType, p: Params, device: &str, run_time: bool) -> Engine {
    torchtrt::init_plugins().expect("plugins");
    let mut net = NetworkDefinition::new();
    let n = Dim::dynamic("n", 1, 40, 200);
    let boxes = net
        .add_input(
            "boxes",
            dtype,
            &[Dim::dynamic("b", 1, 2, 3), n.clone(), 4.into()],
        )
        .expect("boxes");
    let scores = net
        .add_input("scores", dtype, &[Dim::dynamic("b", 1, 2, 3), 3.into(), n])
        .expect("scores");
    let key = PluginKey::new("torch_tensorrt", "NonMaxSuppression", "1");
    let mut fields = p.fields("onnx");
    let mut inputs = vec![boxes, scores];
    if run_time {
        let one = [1.into()];
        inputs.push(net.add_input("max_out", DType::I64, &one).expect("max_out"));
        inputs.push(net.add_input("iou", DType::F32, &one).expect("iou"));
        fields.set("max_output_input", 2i32);
        fields.set("iou_input", 3i32);
        if p.score.is_some() {
            inputs.push(net.add_input("score", DType::F32, &one).expect("score"));
            fields.set("score_input", 4i32);
        }
    }
    let outs = net
        .add_plugin("nms", torchtrt::registry(), &key, &fields, &inputs)
        .expect("nms");
    let shape = net
        .add_layer(
            "shape",
            layers::Shape {
                start: 0,
                end: None,
            },
            &[outs[0]],
        )
        .expect("shape")[0];
    let as_float = net
        .add_layer("as_float", layers::Cast { to: DType::F32 }, &[outs[0]])
        .expect("cast")[0];
    let one = net
        .add_constant("one", Tensor::from_vec(&[1], vec![1.0f32]).expect("one"))
        .expect("one");
    let plus = net
        .add_layer(
            "plus",
            layers::Elementwise::new(layers::ElementwiseOp::Add),
            &[as_float, one],
        )
        .expect("plus")[0];
    net.mark_output(outs[0], "selected").expect("selected");
    net.mark_output(shape, "shape").expect("shape");
    net.mark_output(plus, "plus").expect("plus");
    torchtrt::compile_for(&net, &BuildConfig::default(), device).expect("compiles")
}

fn encode(v: &[f32], dtype: DType, shape: &[usize]) -> (Tensor, Vec<f32>) {
    match dtype {
        DType::F16 => {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            let back = h.iter().map(|x| x.to_f32()).collect();
            (Tensor::from_vec(shape, h).expect("f16"), back)
        }
        _ => (
            Tensor::from_vec(shape, v.to_vec()).expect("f32"),
            v.to_vec(),
        ),
    }
}

/// Runs the ONNX-layout engine on several problems of one shape (and one of another) in one
/// context, before and after serialisation, each against the reference.
fn check_onnx(device: &str, dtype: DType) {
    for p in [
        Params {
            max_out: -1,
            iou: 0.3,
            score: None,
        },
        Params {
            max_out: 4,
            iou: 0.5,
            score: Some(0.4),
        },
        Params {
            max_out: 0,
            iou: 0.5,
            score: None,
        },
    ] {
        let engine = onnx_engine(dtype, p, device, false);
        let reloaded = torchtrt::Runtime::new()
            .expect("runtime")
            .deserialize(&engine.serialize())
            .expect("reloads");
        let run_time = onnx_engine(dtype, p, device, true);
        for (engine, run_time) in [(engine, false), (reloaded, false), (run_time, true)] {
            let mut ctx = engine.create_context().expect("context");
            let mut lengths = Vec::new();
            for (seed, (b, n)) in [(2, 40), (2, 40), (2, 40), (1, 7), (3, 120)]
                .into_iter()
                .enumerate()
            {
                let seed = seed as u64 * 31 + 5;
                let (bt, boxes) = encode(&crowded_boxes(b, n, seed), dtype, &[b, n, 4]);
                let raw = uniform(b * 3 * n, seed + 1);
                let raw = if seed.is_multiple_of(2) {
                    tied(raw)
                } else {
                    raw
                };
                let (st, scores) = encode(&raw, dtype, &[b, 3, n]);
                let want = reference(&boxes, &scores, (b, 3, n), p);
                let max_out =
                    Tensor::from_vec(&[1], vec![if p.max_out < 0 { 1000 } else { p.max_out }])
                        .expect("max_out");
                let iou = Tensor::from_vec(&[1], vec![p.iou]).expect("iou");
                let score = Tensor::from_vec(&[1], vec![p.score.unwrap_or(0.0)]).expect("score");
                let mut args = vec![&bt, &st];
                if run_time {
                    args.extend([&max_out, &iou]);
                    if p.score.is_some() {
                        args.push(&score);
                    }
                }
                let got = ctx
                    .execute(&args)
                    .unwrap_or_else(|e| panic!("{device} runs: {e}"));
                let selected = got[0].as_slice::<i64>().expect("i64");
                let flat: Vec<i64> = want.iter().flatten().copied().collect();
                assert_eq!(
                    got[0].shape(),
                    [want.len(), 3],
                    "{device} {dtype} {p:?} seed {seed}"
                );
                assert_eq!(selected, flat, "{device} {dtype} {p:?} seed {seed}");
                assert_eq!(
                    got[1].as_slice::<i64>().expect("i64"),
                    [want.len() as i64, 3]
                );
                let plus: Vec<f32> = flat.iter().map(|&v| v as f32 + 1.0).collect();
                assert_eq!(got[2].as_slice::<f32>().expect("f32"), plus.as_slice());
                lengths.push(want.len());
            }
            if p.max_out != 0 {
                assert!(
                    lengths[..3].windows(2).any(|w| w[0] != w[1]) || lengths[0] > 0,
                    "the problems select something: {lengths:?}"
                );
            }
        }
    }
}

#[test]
fn onnx_layout_matches_the_reference_on_the_cpu() {
    check_onnx("cpu", DType::F32);
    check_onnx("cpu", DType::F16);
}

#[test]
fn onnx_layout_matches_the_reference_on_cuda() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    check_onnx("cuda", DType::F32);
    check_onnx("cuda", DType::F16);
}

/// torchvision's `nms(boxes, scores, iou)`: boxes `[n, 4]` as `x1, y1, x2, y2`, the kept
/// indices by falling score.
fn check_torchvision(device: &str) {
    torchtrt::init_plugins().expect("plugins");
    let p = Params {
        max_out: -1,
        iou: 0.45,
        score: None,
    };
    let mut net = NetworkDefinition::new();
    let n = Dim::dynamic("n", 0, 64, 512);
    let boxes = net
        .add_input("boxes", DType::F32, &[n.clone(), 4.into()])
        .expect("boxes");
    let scores = net.add_input("scores", DType::F32, &[n]).expect("scores");
    let key = PluginKey::new("torch_tensorrt", "NonMaxSuppression", "1");
    let outs = net
        .add_plugin(
            "nms",
            torchtrt::registry(),
            &key,
            &p.fields("torchvision"),
            &[boxes, scores],
        )
        .expect("nms");
    net.mark_output(outs[0], "keep").expect("keep");
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), device).expect("compiles");
    let mut ctx = engine.create_context().expect("context");
    for (seed, n) in [(3u64, 64usize), (4, 300), (5, 1), (6, 0), (7, 200)] {
        let boxes = crowded_boxes(1, n, seed);
        let scores = uniform(n, seed + 7);
        let scores = if seed == 7 { tied(scores) } else { scores };
        let want: Vec<i64> = reference(&boxes, &scores, (1, 1, n), p)
            .iter()
            .map(|t| t[2])
            .collect();
        let bt = Tensor::from_vec(&[n, 4], boxes).expect("boxes");
        let st = Tensor::from_vec(&[n], scores).expect("scores");
        let got = ctx.execute(&[&bt, &st]).expect("runs");
        assert_eq!(
            got[0].as_slice::<i64>().expect("i64"),
            want.as_slice(),
            "{device} n {n}"
        );
    }
}

#[test]
fn torchvision_layout_matches_the_reference() {
    check_torchvision("cpu");
    if torchtrt::cuda::probe::available() {
        check_torchvision("cuda");
    }
}

/// A plugin that claims one more element than it was allocated for.
#[derive(Clone)]
struct Overcount;

impl Plugin for Overcount {
    fn num_outputs(&self) -> usize {
        2
    }
    fn output_dtypes(&self, _: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![DType::F32, DType::I64])
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(vec![inputs[0].clone(), vec![DimExpr::Const(1)]])
    }
    fn sized_outputs(&self) -> Vec<SizedOutput> {
        vec![SizedOutput {
            output: 0,
            axis: 0,
            count: 1,
        }]
    }
    fn supports(&self, pos: usize, io: &[PortDesc], _: usize, device: DeviceKind) -> bool {
        device == DeviceKind::Cpu
            && io[pos].format == TensorFormat::Linear
            && io[pos].dtype == if pos == 2 { DType::I64 } else { DType::F32 }
    }
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(cpu) = launch else {
            return Err(torchtrt::plugin_api::PluginError::Unsupported(
                "cpu only".into(),
            ));
        };
        let upper = cpu.outputs[0].desc.shape[0];
        cpu.outputs[0].data.fill(0);
        cpu.outputs[1]
            .data
            .copy_from_slice(&(upper + 1).to_le_bytes());
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

struct OvercountCreator;

impl PluginCreator for OvercountCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("tests", "Overcount", "1")
    }
    fn field_schema(&self) -> Vec<torchtrt::plugin_api::FieldSpec> {
        Vec::new()
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Overcount))
    }
}

#[test]
fn a_count_beyond_the_bound_is_an_error_naming_the_layer() {
    let registry = torchtrt::registry();
    registry
        .register_creator(std::sync::Arc::new(OvercountCreator), "tests")
        .ok();
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[5.into(), 2.into()])
        .expect("x");
    let outs = net
        .add_plugin(
            "over",
            registry,
            &OvercountCreator.key(),
            &FieldCollection::new(),
            &[x],
        )
        .expect("plugin");
    net.mark_output(outs[0], "y").expect("y");
    let engine = torchtrt::compile(&net, &BuildConfig::default()).expect("compiles");
    let mut ctx = engine.create_context().expect("context");
    let x = Tensor::from_vec(&[5, 2], common::random_f32(10, 1)).expect("x");
    let err = ctx.execute(&[&x]).expect_err("refused").to_string();
    assert!(
        err.contains("over") && err.contains("count 6") && err.contains("0..=5"),
        "{err}"
    );
    let again = ctx.execute(&[&x]).expect_err("still refused").to_string();
    assert_eq!(err, again);
}

/// Bound I/O: outputs bound at the shapes `output_shapes` gives (the selection's length at
/// its bound) receive the actual selection at their start, and `last_output_shapes` says
/// how long it is; a buffer too small for the run's selection is refused by name.
#[test]
fn bound_outputs_of_a_data_dependent_length_get_their_actual_shape() {
    let p = Params {
        max_out: -1,
        iou: 0.3,
        score: None,
    };
    let engine = onnx_engine(DType::F32, p, "cpu", false);
    assert_eq!(engine.data_dependent_outputs(), [true, true, true]);
    let mut ctx = engine.create_context().expect("context");
    for (seed, (b, n)) in [(11u64, (2usize, 40usize)), (12, (1, 9))] {
        let boxes = crowded_boxes(b, n, seed);
        let scores = uniform(b * 3 * n, seed + 1);
        let want = reference(&boxes, &scores, (b, 3, n), p);
        let flat: Vec<i64> = want.iter().flatten().copied().collect();
        let bt = Tensor::from_vec(&[b, n, 4], boxes).expect("boxes");
        let st = Tensor::from_vec(&[b, 3, n], scores).expect("scores");
        let shapes = ctx
            .output_shapes(&[(DType::F32, &[b, n, 4]), (DType::F32, &[b, 3, n])])
            .expect("shapes");
        assert_eq!(shapes[0], [b * 3 * n, 3], "the bound");
        let mut selected = vec![-1i64; shapes[0].iter().product()];
        let mut shape = vec![-1i64; shapes[1].iter().product()];
        let mut plus = vec![f32::NAN; shapes[2].iter().product()];
        ctx.bind_owned(&[("boxes", &bt), ("scores", &st)])
            .expect("inputs");
        // SAFETY: the vectors outlive the run and nothing else touches them.
        unsafe {
            let host = |p: *mut u8, d, s: &[usize]| torchtrt::IoBuffer::host(p, d, s);
            ctx.bind_output(
                "selected",
                &host(selected.as_mut_ptr().cast(), DType::I64, &shapes[0]),
            )
            .expect("selected");
            ctx.bind_output(
                "shape",
                &host(shape.as_mut_ptr().cast(), DType::I64, &shapes[1]),
            )
            .expect("shape");
            ctx.bind_output(
                "plus",
                &host(plus.as_mut_ptr().cast(), DType::F32, &shapes[2]),
            )
            .expect("plus");
        }
        ctx.execute_bound().expect("runs");
        let last = ctx.last_output_shapes().to_vec();
        assert_eq!(last[0], [want.len(), 3]);
        assert_eq!(selected[..flat.len()], flat[..]);
        assert_eq!(shape, [want.len() as i64, 3]);
        let plus_want: Vec<f32> = flat.iter().map(|&v| v as f32 + 1.0).collect();
        assert_eq!(plus[..flat.len()], plus_want[..]);
    }
    let mut tiny = vec![0i64; 3];
    let (b, n) = (2usize, 40usize);
    let bt = Tensor::from_vec(&[b, n, 4], crowded_boxes(b, n, 3)).expect("boxes");
    let st = Tensor::from_vec(&[b, 3, n], uniform(b * 3 * n, 4)).expect("scores");
    ctx.bind_owned(&[("boxes", &bt), ("scores", &st)])
        .expect("inputs");
    // SAFETY: `tiny` outlives the run.
    unsafe {
        ctx.bind_output(
            "selected",
            &torchtrt::IoBuffer::host(tiny.as_mut_ptr().cast(), DType::I64, &[1, 3]),
        )
    }
    .expect("binds");
    let e = ctx.execute_bound().expect_err("too small").to_string();
    assert!(e.contains("selected"), "{e}");
}
