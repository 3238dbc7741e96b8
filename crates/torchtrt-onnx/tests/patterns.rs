//! Exported GELU and `F.normalize` patterns become plugin layers.

mod common;

use common::{f32_init, i64_init, int, ints, model, node, random_f32, value};
use torchtrt::{BuildConfig, Engine, Tensor};
use torchtrt_core::layers::LayerKind;
use torchtrt_onnx::proto::ModelProto;
use torchtrt_onnx::{ImportOptions, import_model};

fn compile(m: &ModelProto, fuse: bool) -> Engine {
    torchtrt::init_plugins().unwrap();
    let options = ImportOptions {
        fuse_patterns: fuse,
        evaluator: Some(torchtrt::default_backends().remove(0)),
        ..ImportOptions::default()
    };
    let net = import_model(m, None, torchtrt::registry(), &options).unwrap();
    torchtrt::compile(&net, &BuildConfig::default()).unwrap()
}

fn plugins(e: &Engine) -> Vec<String> {
    e.plan()
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            LayerKind::Plugin(p) => Some(format!(
                "{}:{}",
                p.key,
                p.fields
                    .string("approximate")
                    .or(p.fields.string("mode"))
                    .unwrap_or("")
            )),
            _ => None,
        })
        .collect()
}

fn run(e: &Engine, x: &Tensor) -> Vec<f32> {
    e.create_context().unwrap().execute(&[x]).unwrap()[0]
        .as_slice::<f32>()
        .unwrap()
        .to_vec()
}

fn assert_close(a: &[f32], b: &[f32], tol: f32) {
    let tol = f64::from(tol);
    torchtrt_testing::check_floats(a, b, torchtrt_testing::Tol::new(tol, tol))
        .unwrap_or_else(|m| panic!("{m}"));
}

fn gelu_erf_model(half_first: bool) -> ModelProto {
    let tail = if half_first {
        vec![
            node("Mul", &["x", "half"], &["hx"], vec![]),
            node("Mul", &["hx", "a"], &["y"], vec![]),
        ]
    } else {
        vec![
            node("Mul", &["x", "a"], &["xa"], vec![]),
            node("Mul", &["xa", "half"], &["y"], vec![]),
        ]
    };
    let mut nodes = vec![
        node("Div", &["x", "sqrt2"], &["d"], vec![]),
        node("Erf", &["d"], &["e"], vec![]),
        node("Add", &["e", "one"], &["a"], vec![]),
    ];
    nodes.extend(tail);
    model(
        nodes,
        vec![
            f32_init("sqrt2", &[], &[std::f32::consts::SQRT_2]),
            f32_init("one", &[], &[1.0]),
            f32_init("half", &[], &[0.5]),
        ],
        vec![value("x", 1, &[4, 16])],
        vec![value("y", 1, &[4, 16])],
        17,
    )
}

#[test]
fn exact_gelu_pattern_becomes_the_plugin() {
    let x = Tensor::from_vec(&[4, 16], random_f32(64, 1)).unwrap();
    for half_first in [false, true] {
        let m = gelu_erf_model(half_first);
        let fused = compile(&m, true);
        assert_eq!(plugins(&fused), ["::CustomGeluPluginDynamic@1:none"]);
        assert_eq!(fused.plan().layers.len(), 1);
        let plain = compile(&m, false);
        assert!(plugins(&plain).is_empty());
        assert_close(&run(&fused, &x), &run(&plain, &x), 1e-5);
    }
}

fn tanh_gelu_model() -> ModelProto {
    model(
        vec![
            node("Pow", &["x", "three"], &["p"], vec![]),
            node("Mul", &["p", "c"], &["pc"], vec![]),
            node("Add", &["x", "pc"], &["s"], vec![]),
            node("Mul", &["s", "k"], &["sk"], vec![]),
            node("Tanh", &["sk"], &["t"], vec![]),
            node("Add", &["t", "one"], &["a"], vec![]),
            node("Mul", &["x", "a"], &["xa"], vec![]),
            node("Mul", &["xa", "half"], &["y"], vec![]),
        ],
        vec![
            f32_init("three", &[], &[3.0]),
            f32_init("c", &[], &[0.044715]),
            f32_init("k", &[], &[(2.0f32 / std::f32::consts::PI).sqrt()]),
            f32_init("one", &[], &[1.0]),
            f32_init("half", &[], &[0.5]),
        ],
        vec![value("x", 1, &[3, 10])],
        vec![value("y", 1, &[3, 10])],
        17,
    )
}

#[test]
fn tanh_gelu_pattern_becomes_the_plugin() {
    let m = tanh_gelu_model();
    let x = Tensor::from_vec(&[3, 10], random_f32(30, 2)).unwrap();
    let fused = compile(&m, true);
    assert_eq!(plugins(&fused), ["::CustomGeluPluginDynamic@1:tanh"]);
    assert_close(&run(&fused, &x), &run(&compile(&m, false), &x), 1e-5);
}

/// Found by the `onnx_build` fuzz target: a pattern node with fewer inputs than its op
/// takes (an inner `Mul` of one input made the GELU matcher index past its factors). Every
/// node of both GELU patterns, cut to each shorter input list, imports or is refused,
/// without a panic.
#[test]
fn pattern_nodes_missing_inputs_are_refused_not_a_panic() {
    torchtrt::init_plugins().unwrap();
    let options = ImportOptions {
        fuse_patterns: true,
        ..ImportOptions::default()
    };
    for base in [
        gelu_erf_model(false),
        gelu_erf_model(true),
        tanh_gelu_model(),
    ] {
        let nodes = base.graph.as_ref().unwrap().node.len();
        for k in 0..nodes {
            let arity = base.graph.as_ref().unwrap().node[k].input.len();
            for keep in 0..arity {
                let mut m = base.clone();
                m.graph.as_mut().unwrap().node[k].input.truncate(keep);
                let imported = import_model(&m, None, torchtrt::registry(), &options);
                assert!(imported.is_err(), "node {k} with {keep} inputs imported");
            }
        }
    }
}

#[test]
fn shared_intermediates_block_the_rewrite() {
    let mut m = gelu_erf_model(false);
    let g = m.graph.as_mut().unwrap();
    g.output.push(value("e", 1, &[4, 16]));
    let fused = compile(&m, true);
    assert!(
        plugins(&fused).is_empty(),
        "erf output is a graph output: no fusion"
    );
}

#[test]
fn f_normalize_pattern_becomes_normalize_plugin() {
    for use_clip in [true, false] {
        let clamp = if use_clip {
            node("Clip", &["n", "eps"], &["c"], vec![])
        } else {
            node("Max", &["n", "eps"], &["c"], vec![])
        };
        let m = model(
            vec![
                node("ReduceL2", &["x", "axes"], &["n"], vec![int("keepdims", 1)]),
                clamp,
                node("Div", &["x", "c"], &["y"], vec![]),
            ],
            vec![f32_init("eps", &[], &[1e-12]), i64_init("axes", &[1], &[1])],
            vec![value("x", 1, &[2, 5, 3])],
            vec![value("y", 1, &[2, 5, 3])],
            18,
        );
        let fused = compile(&m, true);
        assert_eq!(
            plugins(&fused),
            ["torch_tensorrt::NormalizePlugin@1:normalize"]
        );
        let xs = random_f32(30, 3);
        let x = Tensor::from_vec(&[2, 5, 3], xs.clone()).unwrap();
        let mut want = vec![0f32; 30];
        for b in 0..2 {
            for k in 0..3 {
                let norm = (0..5)
                    .map(|c| xs[b * 15 + c * 3 + k].powi(2))
                    .sum::<f32>()
                    .sqrt()
                    .max(1e-12);
                for c in 0..5 {
                    want[b * 15 + c * 3 + k] = xs[b * 15 + c * 3 + k] / norm;
                }
            }
        }
        assert_close(&run(&fused, &x), &want, 1e-5);
    }
    let _ = ints;
}
