//! Every layer kind has a CPU kernel: `prepare` succeeds for each, except the kinds the
//! runtime executes itself, which are refused with a message saying so.

use torchtrt_core::layers::*;
use torchtrt_core::plugin_api::{DType, FieldCollection, PluginKey, const_shape};
use torchtrt_core::{Backend, InferInput, LayerKind, Tensor};

use crate::support::{global, pooled};

/// Whether the CPU backend must have a kernel for this kind. Exhaustive on purpose: a new
/// kind does not compile here until it is listed.
fn needs_kernel(kind: &LayerKind) -> bool {
    match kind {
        LayerKind::Constant(_) | LayerKind::Plugin(_) => false,
        LayerKind::Elementwise(_)
        | LayerKind::Unary(_)
        | LayerKind::Activation(_)
        | LayerKind::MatMul(_)
        | LayerKind::Convolution(_)
        | LayerKind::Pooling(_)
        | LayerKind::Reduce(_)
        | LayerKind::Softmax(_)
        | LayerKind::Reshape(_)
        | LayerKind::Transpose(_)
        | LayerKind::Concat(_)
        | LayerKind::Slice(_)
        | LayerKind::Gather(_)
        | LayerKind::Cast(_)
        | LayerKind::Deconvolution(_)
        | LayerKind::Normalization(_)
        | LayerKind::ArgReduce(_)
        | LayerKind::CumSum(_)
        | LayerKind::TopK(_)
        | LayerKind::DepthToSpace(_)
        | LayerKind::SpaceToDepth(_)
        | LayerKind::Trilu(_)
        | LayerKind::Einsum(_)
        | LayerKind::Shape(_)
        | LayerKind::Size(_)
        | LayerKind::ConstantOfShape(_)
        | LayerKind::Flatten(_)
        | LayerKind::Squeeze(_)
        | LayerKind::Unsqueeze(_)
        | LayerKind::Expand(_)
        | LayerKind::Tile(_)
        | LayerKind::Pad(_)
        | LayerKind::Range(_)
        | LayerKind::Select(_)
        | LayerKind::GatherElements(_)
        | LayerKind::ScatterElements(_)
        | LayerKind::Fused(_)
        | LayerKind::GatherNd(_)
        | LayerKind::ScatterNd(_)
        | LayerKind::NonZero(_)
        | LayerKind::ValueTest(_)
        | LayerKind::RmsNormalization(_)
        | LayerKind::RotaryEmbedding(_)
        | LayerKind::Attention(_)
        | LayerKind::Quantize(_)
        | LayerKind::Dequantize(_)
        | LayerKind::QuantizedConvolution(_)
        | LayerKind::QuantizedMatMul(_) => true,
    }
}

/// A layer and input dtypes and shapes it accepts.
type Sample = (LayerKind, Vec<(DType, Vec<i64>)>);

/// One layer of every kind.
fn samples() -> Vec<Sample> {
    let f = |shape: &[i64]| (DType::F32, shape.to_vec());
    let i = |shape: &[i64]| (DType::I64, shape.to_vec());
    vec![
        (Constant::new(Tensor::scalar(1f32)).into(), vec![]),
        (
            Elementwise::new(ElementwiseOp::Add).into(),
            vec![f(&[2, 3]), f(&[3])],
        ),
        (Unary { op: UnaryOp::Exp }.into(), vec![f(&[4])]),
        (
            Activation {
                kind: ActivationKind::Relu,
            }
            .into(),
            vec![f(&[4])],
        ),
        (MatMul::default().into(), vec![f(&[2, 3]), f(&[3, 4])]),
        (
            Convolution::new(2).into(),
            vec![f(&[1, 2, 5, 5]), f(&[3, 2, 3, 3])],
        ),
        (
            Pooling::new(PoolKind::Max, vec![2, 2]).into(),
            vec![f(&[1, 2, 4, 4])],
        ),
        (
            Reduce {
                op: ReduceOp::Sum,
                axes: vec![],
                keep_dims: false,
            }
            .into(),
            vec![f(&[2, 3])],
        ),
        (
            Softmax {
                axis: -1,
                log: false,
            }
            .into(),
            vec![f(&[2, 3])],
        ),
        (Reshape::new(vec![-1]).into(), vec![f(&[2, 3])]),
        (Transpose { perm: vec![1, 0] }.into(), vec![f(&[2, 3])]),
        (Concat { axis: 0 }.into(), vec![f(&[2, 3]), f(&[1, 3])]),
        (
            Slice {
                starts: vec![0],
                ends: vec![1],
                axes: vec![0],
                steps: vec![1],
            }
            .into(),
            vec![f(&[2, 3])],
        ),
        (
            Gather { axis: 0 }.into(),
            vec![f(&[2, 3]), (DType::I64, vec![4])],
        ),
        (Cast { to: DType::F16 }.into(), vec![f(&[2, 3])]),
        (
            Deconvolution::new(2).into(),
            vec![f(&[1, 2, 3, 3]), f(&[2, 3, 2, 2])],
        ),
        (
            Normalization {
                axes: vec![-1],
                epsilon: 1e-5,
            }
            .into(),
            vec![f(&[2, 3]), f(&[3]), f(&[3])],
        ),
        (
            ArgReduce {
                max: true,
                axis: 1,
                keep_dims: false,
                select_last_index: false,
            }
            .into(),
            vec![f(&[2, 3])],
        ),
        (
            CumSum::default().into(),
            vec![f(&[2, 3]), (DType::I64, vec![])],
        ),
        (
            TopK {
                axis: -1,
                largest: true,
                sorted: true,
            }
            .into(),
            vec![f(&[2, 3]), (DType::I64, vec![1])],
        ),
        (
            DepthToSpace {
                blocksize: 2,
                mode: DepthToSpaceMode::Dcr,
            }
            .into(),
            vec![f(&[1, 4, 2, 2])],
        ),
        (SpaceToDepth { blocksize: 2 }.into(), vec![f(&[1, 1, 4, 4])]),
        (Trilu { upper: true }.into(), vec![f(&[3, 3])]),
        (
            Einsum {
                equation: "ij,jk->ik".into(),
            }
            .into(),
            vec![f(&[2, 3]), f(&[3, 4])],
        ),
        (Shape::default().into(), vec![f(&[2, 3])]),
        (Size.into(), vec![f(&[2, 3])]),
        (ConstantOfShape::new(0f32).into(), vec![i(&[2])]),
        (Flatten { axis: 1 }.into(), vec![f(&[2, 3, 4])]),
        (
            Squeeze {
                axes: Some(vec![0]),
            }
            .into(),
            vec![f(&[1, 3])],
        ),
        (Unsqueeze { axes: vec![0] }.into(), vec![f(&[3])]),
        (Expand.into(), vec![f(&[3]), i(&[2])]),
        (Tile.into(), vec![f(&[2, 3]), i(&[2])]),
        (Pad::default().into(), vec![f(&[2, 3]), i(&[4])]),
        (Range.into(), vec![f(&[]), f(&[]), f(&[])]),
        (
            Select.into(),
            vec![(DType::Bool, vec![2, 3]), f(&[2, 3]), f(&[3])],
        ),
        (
            GatherElements { axis: 0 }.into(),
            vec![f(&[2, 3]), i(&[2, 3])],
        ),
        (
            ScatterElements::default().into(),
            vec![f(&[2, 3]), i(&[2, 3]), f(&[2, 3])],
        ),
        (
            Fused {
                inputs: 2,
                steps: vec![
                    FusedStep {
                        kind: Elementwise::new(ElementwiseOp::Add).into(),
                        operands: vec![FusedOperand::Input(0), FusedOperand::Input(1)],
                    },
                    FusedStep {
                        kind: Activation {
                            kind: ActivationKind::Relu,
                        }
                        .into(),
                        operands: vec![FusedOperand::Step(0)],
                    },
                ],
            }
            .into(),
            vec![f(&[2, 3]), f(&[3])],
        ),
        (
            GatherNd { batch_dims: 0 }.into(),
            vec![f(&[2, 3]), i(&[4, 1])],
        ),
        (
            ScatterNd::default().into(),
            vec![f(&[2, 3]), i(&[4, 1]), f(&[4, 3])],
        ),
        (NonZero.into(), vec![f(&[2, 3])]),
        (
            ValueTest {
                test: ValueTestKind::Nan,
            }
            .into(),
            vec![f(&[2, 3])],
        ),
        (
            RmsNormalization {
                axes: vec![-1],
                epsilon: 1e-5,
            }
            .into(),
            vec![f(&[2, 3]), f(&[3])],
        ),
        (
            RotaryEmbedding::default().into(),
            vec![f(&[1, 2, 3, 4]), f(&[1, 3, 2]), f(&[1, 3, 2])],
        ),
        (
            Attention::default().into(),
            vec![f(&[1, 2, 3, 4]), f(&[1, 2, 5, 4]), f(&[1, 2, 5, 6])],
        ),
        (
            Quantize {
                axis: 1,
                to: DType::I8,
            }
            .into(),
            vec![f(&[2, 3]), f(&[3]), (DType::I8, vec![3])],
        ),
        (
            Dequantize { axis: 1 }.into(),
            vec![(DType::U8, vec![2, 3]), f(&[])],
        ),
        (
            QuantizedConvolution {
                conv: Convolution::new(2),
                input_scale: 0.5,
                input_zero_point: 3,
                weight_scales: vec![0.25; 4],
                dtype: DType::F32,
                output: None,
            }
            .into(),
            vec![
                (DType::I8, vec![1, 2, 5, 5]),
                (DType::I8, vec![4, 2, 3, 3]),
                f(&[4]),
            ],
        ),
        (
            QuantizedMatMul {
                input_scale: 0.5,
                input_zero_point: 3,
                weight_scales: vec![0.25; 4],
                dtype: DType::F32,
                output: None,
            }
            .into(),
            vec![(DType::U8, vec![2, 3, 6]), (DType::I8, vec![4, 6]), f(&[4])],
        ),
        (
            PluginLayer::unresolved(
                PluginKey::new("", "Anything", "1"),
                FieldCollection::new(),
                None,
                None,
            )
            .into(),
            vec![f(&[2])],
        ),
    ]
}

#[test]
fn every_kind_but_constant_and_plugin_has_a_kernel() {
    let samples = samples();
    let kinds: std::collections::BTreeSet<&str> =
        samples.iter().map(|(l, _)| l.op().kind()).collect();
    assert_eq!(kinds.len(), samples.len(), "one sample per kind");
    for backend in [global(), pooled()] {
        for (layer, inputs) in &samples {
            let shapes: Vec<_> = inputs.iter().map(|(_, s)| const_shape(s)).collect();
            let infer: Vec<InferInput<'_>> = inputs
                .iter()
                .zip(&shapes)
                .map(|((dtype, _), shape)| InferInput {
                    dtype: *dtype,
                    shape,
                    value: None,
                })
                .collect();
            let result = backend.prepare(layer, &infer);
            let kind = layer.op().kind();
            if needs_kernel(layer) {
                assert!(result.is_ok(), "{kind}: {:?}", result.err());
            } else {
                let err = result.err().unwrap_or_default();
                assert!(
                    err.contains("runtime"),
                    "{kind} should be refused, got {err:?}"
                );
            }
        }
    }
}

#[test]
fn wrong_input_count_and_dtype_are_errors() {
    let shape = const_shape(&[2]);
    let one = [InferInput {
        dtype: DType::F32,
        shape: &shape,
        value: None,
    }];
    let err = global()
        .prepare(&MatMul::default().into(), &one)
        .err()
        .unwrap_or_default();
    assert!(err.contains("inputs"), "{err}");
    let bool_in = [InferInput {
        dtype: DType::Bool,
        shape: &shape,
        value: None,
    }];
    assert!(
        global()
            .prepare(
                &Softmax {
                    axis: 0,
                    log: false
                }
                .into(),
                &bool_in
            )
            .is_err()
    );
}

#[test]
fn backend_identity() {
    assert_eq!(global().name(), "cpu");
    assert_eq!(
        global().device(),
        torchtrt_core::plugin_api::DeviceKind::Cpu
    );
    assert_eq!(pooled().num_threads(), 3);
}
