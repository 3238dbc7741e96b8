//! The builder's `split_products` pass, on the CPU backend made to ask for it (CUDA does; the
//! CPU does not): a product sliced along its columns (a fused QKV projection split into
//! queries, keys and values) becomes one product per slice, with the same results; anything
//! else reading the product keeps it whole, and the plain CPU backend keeps it whole too.

use std::sync::Arc;

use torchtrt_core::layers::{Elementwise, ElementwiseOp, MatMul, Reshape, Slice};
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, InferInput, Kernel, LayerKind, NetworkDefinition, Tensor,
    build,
};
use torchtrt_cpu::CpuBackend;

/// The CPU backend, asking the builder to split sliced products.
struct Splitting(CpuBackend);

impl Backend for Splitting {
    fn device(&self) -> DeviceKind {
        self.0.device()
    }

    fn name(&self) -> String {
        self.0.name()
    }

    fn prepare(
        &self,
        layer: &LayerKind,
        inputs: &[InferInput<'_>],
    ) -> Result<Box<dyn Kernel>, String> {
        self.0.prepare(layer, inputs)
    }

    fn splits_sliced_products(&self) -> bool {
        true
    }
}

const BATCH: usize = 2;
const SEQ: usize = 5;
const HIDDEN: usize = 8;
/// The slices of the product's 14 columns: `[start, end)`, the last one by a negative start.
const SLICES: [(i64, i64); 3] = [(0, 4), (4, 9), (-5, i64::MAX)];
const COLUMNS: usize = 14;

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed) % 1000)
        .map(|v| v as f32 / 500.0 - 1.0)
        .collect()
}

/// How the test network is varied.
#[derive(Clone, Copy, Debug)]
struct Shape {
    /// A bias `Add` after the product.
    bias: bool,
    /// The product reads `[batch · seq, hidden]` reshaped from the input and is reshaped
    /// back before the slices (GPT-2's `Conv1D`); else it reads the rank-3 input.
    reshaped: bool,
    /// The product is also a network output.
    tap: bool,
    /// The second slice takes every other column (no split then).
    strided: bool,
}

/// x `[batch, seq, hidden]` → product by a constant `[hidden, 14]` (+ bias) → three slices
/// of the last axis, each a network output.
fn network(s: Shape) -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[BATCH, SEQ, HIDDEN].map(|d| Dim::Fixed(d as i64)),
        )
        .unwrap();
    let a = if s.reshaped {
        let flat = Reshape::new(vec![(BATCH * SEQ) as i64, HIDDEN as i64]);
        net.add("flatten", flat, &[x]).unwrap()
    } else {
        x
    };
    let w = Tensor::from_vec(&[HIDDEN, COLUMNS], values(HIDDEN * COLUMNS, 3)).unwrap();
    let w = net.add_constant("w", w).unwrap();
    let plain = MatMul {
        transpose_a: false,
        transpose_b: false,
    };
    let mut y = net.add("project", plain, &[a, w]).unwrap();
    if s.bias {
        let b = Tensor::from_vec(&[COLUMNS], values(COLUMNS, 5)).unwrap();
        let b = net.add_constant("b", b).unwrap();
        y = net
            .add("bias", Elementwise::new(ElementwiseOp::Add), &[y, b])
            .unwrap();
    }
    if s.tap {
        net.mark_output(y, "projected").unwrap();
    }
    if s.reshaped {
        let back = Reshape::new(vec![BATCH as i64, SEQ as i64, COLUMNS as i64]);
        y = net.add("unflatten", back, &[y]).unwrap();
    }
    for (i, &(start, end)) in SLICES.iter().enumerate() {
        let step = if s.strided && i == 1 { 2 } else { 1 };
        let slice = Slice {
            starts: vec![start],
            ends: vec![end],
            axes: vec![-1],
            steps: vec![step],
        };
        let part = net.add(&format!("part{i}"), slice, &[y]).unwrap();
        net.mark_output(part, &format!("part{i}")).unwrap();
    }
    net
}

fn kinds(engine: &Engine) -> Vec<&'static str> {
    engine
        .plan()
        .layers
        .iter()
        .map(|l| l.kind.op().kind())
        .filter(|&k| k != "Constant" && k != "Reshape")
        .collect()
}

/// The columns `cols` (with `step`) of `x · w + b` from f64, row-major `[batch · seq, n]`.
fn reference(x: &[f32], bias: bool, cols: &[usize]) -> Vec<f64> {
    let w = values(HIDDEN * COLUMNS, 3);
    let b = values(COLUMNS, 5);
    let mut out = Vec::new();
    for row in x.chunks_exact(HIDDEN) {
        for &c in cols {
            let dot: f64 = row
                .iter()
                .enumerate()
                .map(|(k, &v)| f64::from(v) * f64::from(w[k * COLUMNS + c]))
                .sum();
            out.push(dot + if bias { f64::from(b[c]) } else { 0.0 });
        }
    }
    out
}

#[test]
fn a_product_sliced_along_its_columns_becomes_one_product_per_slice() {
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(Splitting(CpuBackend::new()))];
    let plain: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let x = Tensor::from_vec(&[BATCH, SEQ, HIDDEN], values(BATCH * SEQ * HIDDEN, 11)).unwrap();
    let xs = x.as_slice::<f32>().unwrap().to_vec();
    for bias in [false, true] {
        for reshaped in [false, true] {
            for (tap, strided) in [(false, false), (true, false), (false, true)] {
                let shape = Shape {
                    bias,
                    reshaped,
                    tap,
                    strided,
                };
                let whole = build(&network(shape), &BuildConfig::default(), &plain).unwrap();
                assert!(
                    kinds(&whole).contains(&"Slice"),
                    "{shape:?}: the CPU keeps the slices"
                );
                let engine = build(&network(shape), &BuildConfig::default(), &backends).unwrap();
                let got = kinds(&engine);
                let split = !tap && !strided;
                let slices = got.iter().filter(|&&k| k == "Slice").count();
                let products = got.iter().filter(|&&k| k == "MatMul").count();
                assert_eq!(
                    (slices, products),
                    if split { (0, 3) } else { (3, 1) },
                    "{shape:?}: {got:?}"
                );
                if split {
                    assert!(got.iter().all(|&k| k == "MatMul"), "{shape:?}: {got:?}");
                }
                let outs = engine.create_context().unwrap().execute(&[&x]).unwrap();
                let parts = &outs[usize::from(tap)..];
                for (i, (part, &(start, end))) in parts.iter().zip(&SLICES).enumerate() {
                    let step = if strided && i == 1 { 2 } else { 1 };
                    let lo = if start < 0 {
                        COLUMNS as i64 + start
                    } else {
                        start
                    } as usize;
                    let hi = end.min(COLUMNS as i64) as usize;
                    let cols: Vec<usize> = (lo..hi).step_by(step).collect();
                    assert_eq!(part.shape(), [BATCH, SEQ, cols.len()], "{shape:?} part {i}");
                    let want = reference(&xs, bias, &cols);
                    for (j, (&g, &w)) in part
                        .as_slice::<f32>()
                        .unwrap()
                        .iter()
                        .zip(&want)
                        .enumerate()
                    {
                        assert!(
                            (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0),
                            "{shape:?} part {i}[{j}]: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
}
