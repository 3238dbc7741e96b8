//! Kernels prepared for symbolic shapes run on inputs of different concrete shapes, and on
//! zero-sized tensors.

use torchtrt_core::layers::*;
use torchtrt_core::plugin_api::{DType, DimExpr, ShapeExpr, const_shape, shape_values};
use torchtrt_core::tensor::shape_i64;
use torchtrt_core::{Backend, InferInput, LayerKind, Tensor};

use crate::reference::Nd;
use crate::reference::convolution::{ConvParams, conv};
use crate::reference::matmul::matmul;
use crate::reference::softmax::softmax;
use crate::support::{Rng, Tol, check, global, nd, random, run};

/// Prepares `layer` once for `symbolic` input shapes, then runs it on each set of inputs.
fn run_dynamic(
    layer: LayerKind,
    symbolic: &[(DType, ShapeExpr)],
    runs: &[Vec<Tensor>],
) -> Vec<Tensor> {
    let infer: Vec<InferInput<'_>> = symbolic
        .iter()
        .map(|(dtype, shape)| InferInput {
            dtype: *dtype,
            shape,
            value: None,
        })
        .collect();
    let kernel = global().prepare(&layer, &infer).expect("prepare");
    runs.iter()
        .map(|inputs| {
            let shapes: Vec<ShapeExpr> = inputs
                .iter()
                .map(|t| const_shape(&shape_i64(t.shape())))
                .collect();
            let concrete: Vec<InferInput<'_>> = inputs
                .iter()
                .zip(&shapes)
                .map(|(t, shape)| InferInput {
                    dtype: t.dtype(),
                    shape,
                    value: None,
                })
                .collect();
            let ts = layer.op().infer(&concrete).expect("infer")[0].clone();
            let dims: Vec<usize> = shape_values(&ts.shape)
                .expect("concrete")
                .iter()
                .map(|&d| d as usize)
                .collect();
            let mut out = vec![torchtrt_testing::sentinel_tensor(ts.dtype, &dims)];
            let refs: Vec<&Tensor> = inputs.iter().collect();
            kernel.execute(&refs, &mut out).expect("execute");
            out.remove(0)
        })
        .collect()
}

fn sym(dims: &[&str]) -> ShapeExpr {
    dims.iter()
        .map(|d| {
            d.parse::<i64>()
                .map_or_else(|_| DimExpr::sym(d), DimExpr::Const)
        })
        .collect()
}

#[test]
fn symbolic_batch_and_length() {
    let mut rng = Rng::new(11);
    let f = DType::F32;
    let tol = Tol::of(f).scaled(3.0);

    let shapes = [[2, 5, 3], [7, 1, 3], [1, 9, 3]];
    let runs: Vec<Vec<Tensor>> = shapes
        .iter()
        .map(|s| {
            vec![
                random(f, s, &mut rng, -1.0, 1.0),
                random(f, &[3, 4], &mut rng, -1.0, 1.0),
            ]
        })
        .collect();
    let outs = run_dynamic(
        MatMul::default().into(),
        &[(f, sym(&["n", "s", "3"])), (f, sym(&["3", "4"]))],
        &runs,
    );
    for (out, inputs) in outs.iter().zip(&runs) {
        check(
            out,
            &matmul(&nd(&inputs[0]), &nd(&inputs[1]), false, false),
            tol,
        )
        .unwrap();
    }

    let runs: Vec<Vec<Tensor>> = [[1, 2, 6, 5], [3, 2, 9, 4]]
        .iter()
        .map(|s| {
            vec![
                random(f, s, &mut rng, -1.0, 1.0),
                random(f, &[4, 2, 3, 3], &mut rng, -1.0, 1.0),
            ]
        })
        .collect();
    let mut layer = Convolution::new(2);
    layer.pads_begin = vec![1, 1];
    layer.pads_end = vec![1, 1];
    let params = ConvParams {
        strides: vec![1, 1],
        dilations: vec![1, 1],
        pads_begin: vec![1, 1],
        pads_end: vec![1, 1],
        groups: 1,
    };
    let outs = run_dynamic(
        layer.into(),
        &[
            (f, sym(&["n", "2", "h", "w"])),
            (f, sym(&["4", "2", "3", "3"])),
        ],
        &runs,
    );
    for (out, inputs) in outs.iter().zip(&runs) {
        check(
            out,
            &conv(&nd(&inputs[0]), &nd(&inputs[1]), None, &params),
            tol,
        )
        .unwrap();
    }

    let runs: Vec<Vec<Tensor>> = [[2, 3], [5, 17]]
        .iter()
        .map(|s| vec![random(f, s, &mut rng, -3.0, 3.0)])
        .collect();
    let outs = run_dynamic(
        Softmax {
            axis: -1,
            log: false,
        }
        .into(),
        &[(f, sym(&["b", "l"]))],
        &runs,
    );
    for (out, inputs) in outs.iter().zip(&runs) {
        check(out, &softmax(&nd(&inputs[0]), 1, false), tol).unwrap();
    }
}

#[test]
fn zero_sized_tensors() {
    let mut rng = Rng::new(5);
    let f = DType::F32;
    let empty = random(f, &[0, 3], &mut rng, -1.0, 1.0);
    let row = random(f, &[3], &mut rng, -1.0, 1.0);
    let got = run(Elementwise::new(ElementwiseOp::Add), &[&empty, &row]).unwrap();
    assert_eq!(got.shape(), [0, 3]);

    let sum = run(
        Reduce {
            op: ReduceOp::Sum,
            axes: vec![0],
            keep_dims: false,
        },
        &[&empty],
    )
    .unwrap();
    check(&sum, &Nd::new(vec![3], vec![0.0; 3]), Tol::of(f)).unwrap();

    let got = run(Transpose { perm: vec![1, 0] }, &[&empty]).unwrap();
    assert_eq!(got.shape(), [3, 0]);

    let a = random(f, &[2, 0], &mut rng, -1.0, 1.0);
    let b = random(f, &[0, 4], &mut rng, -1.0, 1.0);
    let got = run(MatMul::default(), &[&a, &b]).unwrap();
    check(&got, &Nd::new(vec![2, 4], vec![0.0; 8]), Tol::of(f)).unwrap();

    let got = run(Softmax { axis: 0, log: true }, &[&empty]).unwrap();
    assert_eq!(got.shape(), [0, 3]);

    let idx = crate::support::from_f64(DType::I64, &[0], &[]);
    let got = run(Gather { axis: 1 }, &[&row.clone(), &idx]);
    assert!(
        got.is_err(),
        "Gather on a rank-1 tensor along axis 1 is an error"
    );
    let got = run(Gather { axis: 0 }, &[&row, &idx]).unwrap();
    assert_eq!(got.shape(), [0]);

    let images = random(f, &[0, 2, 4, 4], &mut rng, -1.0, 1.0);
    let w = random(f, &[3, 2, 3, 3], &mut rng, -1.0, 1.0);
    let got = run(Convolution::new(2), &[&images, &w]).unwrap();
    assert_eq!(got.shape(), [0, 3, 2, 2]);
    let got = run(Pooling::new(PoolKind::Average, vec![2, 2]), &[&images]).unwrap();
    assert_eq!(got.shape(), [0, 2, 2, 2]);
}
