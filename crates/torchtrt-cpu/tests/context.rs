//! The execution context on the CPU backend: layers of constants the builder did not fold
//! are computed once and reused, reshape-like layers take over a dying input's buffer, and
//! repeated runs give the same results as fresh ones.

use std::sync::Arc;

use torchtrt_core::layers::{
    Activation, ActivationKind, ConstantOfShape, Elementwise, ElementwiseOp, Flatten, Reshape,
    Unsqueeze,
};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{Backend, BuildConfig, Dim, NetworkDefinition, Tensor, build};
use torchtrt_cpu::CpuBackend;

/// y = unsqueeze(reshape(x + fill(1.5) · x, [3, 4]) + 1, 0), flat = flatten(x + fill).
fn network() -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::Fixed(2), Dim::Fixed(6)])
        .unwrap();
    let shape = net
        .add_constant("shape", Tensor::from_vec(&[2], vec![2i64, 6]).unwrap())
        .unwrap();
    let fill = net
        .add("fill", ConstantOfShape::new(1.5f32), &[shape])
        .unwrap();
    let add = |net: &mut NetworkDefinition, name: &str, op, a, b| {
        net.add(name, Elementwise::new(op), &[a, b]).unwrap()
    };
    let scaled = add(&mut net, "scaled", ElementwiseOp::Mul, fill, x);
    let sum = add(&mut net, "sum", ElementwiseOp::Add, x, scaled);
    let reshaped = net
        .add("reshape", Reshape::new(vec![3, 4]), &[sum])
        .unwrap();
    let one = net
        .add_constant("one", Tensor::from_vec(&[1], vec![1f32]).unwrap())
        .unwrap();
    let plus = add(&mut net, "plus", ElementwiseOp::Add, reshaped, one);
    let y = net
        .add("unsqueeze", Unsqueeze { axes: vec![0] }, &[plus])
        .unwrap();
    let shifted = add(&mut net, "shifted", ElementwiseOp::Add, x, fill);
    let flat = net.add("flatten", Flatten { axis: 0 }, &[shifted]).unwrap();
    net.mark_output(y, "y").unwrap();
    net.mark_output(flat, "flat").unwrap();
    net
}

#[test]
fn unfolded_constants_and_views_match_on_every_run() {
    let backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
    let config = BuildConfig {
        max_fold_elements: 0,
        ..BuildConfig::default()
    };
    let engine = build(&network(), &config, &backends).unwrap();
    assert!(
        engine.plan().layers.iter().any(|l| l.name == "fill"),
        "the fill must stay a layer for this test"
    );
    let mut ctx = engine.create_context().unwrap();
    for run in 0..3 {
        let xv: Vec<f32> = (0..12)
            .map(|i| (i * (run + 2)) as f32 * 0.25 - 1.0)
            .collect();
        let x = Tensor::from_vec(&[2, 6], xv.clone()).unwrap();
        let outs = ctx.execute(&[&x]).unwrap();
        let want_y: Vec<f32> = xv.iter().map(|v| v + 1.5 * v + 1.0).collect();
        let want_flat: Vec<f32> = xv.iter().map(|v| v + 1.5).collect();
        assert_eq!(outs[0].shape(), &[1, 3, 4]);
        assert_eq!(outs[0].as_slice::<f32>().unwrap(), want_y.as_slice());
        assert_eq!(outs[1].shape(), &[1, 12]);
        assert_eq!(outs[1].as_slice::<f32>().unwrap(), want_flat.as_slice());
    }
}

/// y = relu(reshape(x, s)) with `s` an input: shapes downstream of `s` depend on its values.
fn reshape_by_values() -> NetworkDefinition {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::Fixed(2), Dim::Fixed(6)])
        .expect("x");
    let s = net.add_input("s", DType::I64, &[Dim::Fixed(2)]).expect("s");
    let r = net
        .add_layer("reshape", Reshape::new(Vec::new()), &[x, s])
        .expect("reshape")[0];
    let relu = Activation {
        kind: ActivationKind::Relu,
    };
    let y = net.add_layer("relu", relu, &[r]).expect("relu")[0];
    net.mark_output(y, "y").expect("y");
    net
}

#[test]
fn shapes_that_follow_input_values_are_inferred_on_every_run() {
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let engine = build(&reshape_by_values(), &BuildConfig::default(), &[cpu]).expect("builds");
    let mut ctx = engine.create_context().expect("context");
    let data: Vec<f32> = (0..12).map(|i| i as f32 * 0.7 - 3.1).collect();
    let x = Tensor::from_vec(&[2, 6], data.clone()).expect("x");
    for dims in [[4i64, 3], [3, 4], [4, 3], [12, 1], [2, 6], [3, 4]] {
        let s = Tensor::from_vec(&[2], dims.to_vec()).expect("s");
        let got = ctx.execute(&[&x, &s]).expect("runs");
        let want: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        assert_eq!(got[0].shape(), want.as_slice(), "the shape input's values");
        let relu: Vec<f64> = data.iter().map(|&v| f64::from(v.max(0.0))).collect();
        assert_eq!(got[0].to_f64_vec(), relu);
    }
}
