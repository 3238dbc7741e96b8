//! Pooling, normalization, softmax and reductions.

use torchtrt_core::layers::{Normalization, PoolKind, Pooling, Reduce, ReduceOp, Softmax};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{LayerKind, Tensor};

use crate::common::device_or_skip;
use crate::harness::{check, gpu, rand, supported};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[allow(clippy::too_many_arguments)]
fn pool(
    kind: PoolKind,
    k: &[i64],
    s: &[i64],
    pb: &[i64],
    pe: &[i64],
    d: &[i64],
    ceil: bool,
    include: bool,
) -> LayerKind {
    LayerKind::Pooling(Pooling {
        kind,
        kernel: k.to_vec(),
        strides: s.to_vec(),
        pads_begin: pb.to_vec(),
        pads_end: pe.to_vec(),
        dilations: d.to_vec(),
        ceil_mode: ceil,
        count_include_pad: include,
    })
}

#[test]
fn pooling_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let cases: Vec<(&[usize], LayerKind)> = vec![
        (
            &[2, 5, 13, 11],
            pool(
                PoolKind::Max,
                &[3, 3],
                &[2, 2],
                &[1, 1],
                &[1, 1],
                &[1, 1],
                false,
                false,
            ),
        ),
        (
            &[1, 4, 9, 10],
            pool(
                PoolKind::Max,
                &[2, 3],
                &[2, 2],
                &[0, 1],
                &[1, 1],
                &[2, 1],
                true,
                false,
            ),
        ),
        (
            &[2, 3, 11, 9],
            pool(
                PoolKind::Average,
                &[3, 3],
                &[2, 2],
                &[1, 1],
                &[1, 1],
                &[1, 1],
                true,
                false,
            ),
        ),
        (
            &[2, 3, 11, 9],
            pool(
                PoolKind::Average,
                &[3, 2],
                &[2, 1],
                &[1, 1],
                &[2, 0],
                &[1, 1],
                false,
                true,
            ),
        ),
        (
            &[3, 7, 7, 7],
            pool(
                PoolKind::Average,
                &[7, 7],
                &[1, 1],
                &[0, 0],
                &[0, 0],
                &[1, 1],
                false,
                false,
            ),
        ),
        (
            &[2, 3, 17],
            pool(PoolKind::Max, &[4], &[3], &[2], &[1], &[1], false, false),
        ),
        (
            &[2, 3, 8, 8],
            pool(
                PoolKind::Lp { p: 2 },
                &[2, 2],
                &[2, 2],
                &[0, 0],
                &[0, 0],
                &[1, 1],
                false,
                false,
            ),
        ),
        (
            &[1, 2, 7, 6],
            pool(
                PoolKind::Lp { p: 3 },
                &[3, 2],
                &[1, 2],
                &[1, 0],
                &[1, 0],
                &[1, 1],
                false,
                false,
            ),
        ),
        (
            &[1, 70_000, 2, 3],
            pool(
                PoolKind::Average,
                &[2, 2],
                &[1, 1],
                &[0, 1],
                &[1, 0],
                &[1, 1],
                false,
                true,
            ),
        ),
        (
            &[1, 2, 300, 40],
            pool(
                PoolKind::Max,
                &[5, 3],
                &[2, 2],
                &[2, 1],
                &[2, 1],
                &[1, 1],
                false,
                false,
            ),
        ),
    ];
    for dtype in DTYPES {
        for (i, (shape, l)) in cases.iter().enumerate() {
            check(
                &dev,
                &format!("Pooling case {i} {shape:?}"),
                l,
                &[(rand(dtype, shape, 300 + i as u64), false)],
            );
        }
    }
}

#[test]
fn softmax_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let cases: &[(&[usize], i64, bool)] = &[
        (&[4, 10], -1, false),
        (&[3, 2, 197, 197], -1, false),
        (&[2, 3000], 1, true),
        (&[2, 5, 7, 3], 1, false),
        (&[3, 4, 5], 0, true),
        (&[9], 0, false),
    ];
    for dtype in DTYPES {
        for (i, &(shape, axis, log)) in cases.iter().enumerate() {
            let l = LayerKind::Softmax(Softmax { axis, log });
            check(
                &dev,
                &format!("Softmax {shape:?} axis {axis} log {log}"),
                &l,
                &[(rand(dtype, shape, 400 + i as u64), false)],
            );
        }
    }
}

#[test]
fn reduce_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let ops = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Prod,
        ReduceOp::L1,
        ReduceOp::L2,
        ReduceOp::SumSquare,
        ReduceOp::LogSumExp,
    ];
    let cases: &[(&[usize], &[i64], bool)] = &[
        (&[2, 64, 7, 7], &[2, 3], true),
        (&[3, 5, 1100], &[-1], false),
        (&[4, 6, 5], &[1], true),
        (&[3, 4, 5], &[0, 1], false),
        (&[2, 3, 4], &[], false),
    ];
    for dtype in DTYPES {
        for op in ops {
            for (i, &(shape, axes, keep)) in cases.iter().enumerate() {
                let prod_safe =
                    matches!(op, ReduceOp::Prod) && shape.iter().product::<usize>() > 100;
                let shape: &[usize] = if prod_safe { &[3, 4, 5] } else { shape };
                let axes: &[i64] = if prod_safe { &[2] } else { axes };
                let l = LayerKind::Reduce(Reduce {
                    op,
                    axes: axes.to_vec(),
                    keep_dims: keep,
                });
                check(
                    &dev,
                    &format!("Reduce {op:?} {shape:?} axes {axes:?}"),
                    &l,
                    &[(rand(dtype, shape, 500 + i as u64), false)],
                );
            }
        }
    }
}

#[test]
fn reduce_axes_input_and_declines() {
    let Some(dev) = device_or_skip() else { return };
    let l = LayerKind::Reduce(Reduce {
        op: ReduceOp::Mean,
        axes: vec![],
        keep_dims: true,
    });
    let x = rand(DType::F32, &[2, 3, 4], 7);
    let axes = Tensor::from_vec(&[1], vec![1i64]).unwrap();
    check(
        &dev,
        "Reduce with a constant axes input",
        &l,
        &[(x.clone(), false), (axes.clone(), true)],
    );
    assert!(!supported(&dev, &l, &[(x.clone(), false), (axes, false)]));
    let gaps = LayerKind::Reduce(Reduce {
        op: ReduceOp::Sum,
        axes: vec![0, 2],
        keep_dims: false,
    });
    assert!(!supported(&dev, &gaps, &[(x, false)]));
    let ints = Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
    let sum = LayerKind::Reduce(Reduce {
        op: ReduceOp::Sum,
        axes: vec![],
        keep_dims: false,
    });
    assert!(!supported(&dev, &sum, &[(ints, false)]));
}

#[test]
fn normalization_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    struct Case {
        x: &'static [usize],
        axes: &'static [i64],
        scale: Option<&'static [usize]>,
        bias: Option<&'static [usize]>,
    }
    let cases = [
        Case {
            x: &[2, 7, 96],
            axes: &[-1],
            scale: Some(&[96]),
            bias: Some(&[96]),
        },
        Case {
            x: &[2, 6, 5, 7],
            axes: &[2, 3],
            scale: Some(&[6, 1, 1]),
            bias: Some(&[6, 1, 1]),
        },
        Case {
            x: &[2, 4, 3, 33, 40],
            axes: &[2, 3, 4],
            scale: None,
            bias: None,
        },
        Case {
            x: &[3, 2500],
            axes: &[1],
            scale: Some(&[1, 2500]),
            bias: None,
        },
        Case {
            x: &[5, 4, 6],
            axes: &[0],
            scale: Some(&[4, 6]),
            bias: Some(&[6]),
        },
        Case {
            x: &[2, 3, 8],
            axes: &[1, 2],
            scale: Some(&[3, 8]),
            bias: Some(&[2, 1, 1]),
        },
        Case {
            x: &[4, 197, 384],
            axes: &[-1],
            scale: Some(&[384]),
            bias: Some(&[384]),
        },
        Case {
            x: &[3, 1000],
            axes: &[-1],
            scale: Some(&[1000]),
            bias: None,
        },
        Case {
            x: &[5, 33],
            axes: &[1],
            scale: None,
            bias: None,
        },
        Case {
            x: &[3, 5, 90],
            axes: &[-1],
            scale: Some(&[90]),
            bias: Some(&[90]),
        },
        Case {
            x: &[2, 3, 64],
            axes: &[-1],
            scale: Some(&[1]),
            bias: Some(&[64]),
        },
        Case {
            x: &[2, 3, 4, 32],
            axes: &[2, 3],
            scale: Some(&[4, 32]),
            bias: Some(&[1, 32]),
        },
    ];
    for dtype in DTYPES {
        for (i, c) in cases.iter().enumerate() {
            let l = LayerKind::Normalization(Normalization {
                axes: c.axes.to_vec(),
                epsilon: 1e-5,
            });
            let seed = 600 + 10 * i as u64;
            let mut inputs = vec![(rand(dtype, c.x, seed), false)];
            if let Some(s) = c.scale {
                inputs.push((rand(dtype, s, seed + 1), true));
                if let Some(b) = c.bias {
                    inputs.push((rand(dtype, b, seed + 2), true));
                }
            }
            check(
                &dev,
                &format!("Normalization {:?} axes {:?}", c.x, c.axes),
                &l,
                &inputs,
            );
        }
    }
}

#[test]
fn rows_reject_bad_outputs_and_decline_gapped_axes() {
    let Some(dev) = device_or_skip() else { return };
    let l = LayerKind::Softmax(Softmax {
        axis: 1,
        log: false,
    });
    let x = [(rand(DType::F32, &[2, 3], 1), false)];
    let err = gpu(&dev, &l, &x, &[rand(DType::F32, &[3, 2], 2)]).unwrap_err();
    assert!(err.contains("shape"), "{err}");
    let n = LayerKind::Normalization(Normalization {
        axes: vec![0, 2],
        epsilon: 1e-5,
    });
    assert!(!supported(
        &dev,
        &n,
        &[(rand(DType::F32, &[2, 3, 4], 3), false)]
    ));
    let p = LayerKind::Pooling(Pooling::new(PoolKind::Max, vec![2, 2, 2]));
    assert!(!supported(
        &dev,
        &p,
        &[(rand(DType::F32, &[1, 1, 4, 4, 4], 4), false)]
    ));
}
