//! MatMul: plain, batched, broadcast, transposed, rank-1 and constant operands.

use torchtrt_core::LayerKind;
use torchtrt_core::layers::MatMul;
use torchtrt_core::plugin_api::DType;

use crate::common::device_or_skip;
use crate::harness::{check, gpu, rand};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn layer(transpose_a: bool, transpose_b: bool) -> LayerKind {
    LayerKind::MatMul(MatMul {
        transpose_a,
        transpose_b,
    })
}

/// A's shape, B's shape, transpose A, transpose B, B constant.
type Shapes = (&'static [usize], &'static [usize], bool, bool, bool);

#[test]
fn matmul_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let cases: &[Shapes] = &[
        (&[3, 5], &[5, 7], false, false, false),
        (&[2, 3, 17, 33], &[33, 9], false, false, true),
        (&[2, 1, 4, 6], &[3, 6, 5], false, false, false),
        (&[2, 6, 4], &[2, 5, 6], true, true, false),
        (&[4, 6, 3], &[6, 5], true, false, true),
        (&[7], &[7, 3], false, false, false),
        (&[2, 3, 7], &[7], false, false, false),
        (&[65, 130], &[130, 67], false, false, true),
        (&[2, 3, 0], &[0, 4], false, false, false),
    ];
    for &dtype in &DTYPES {
        for (i, &(a, b, ta, tb, constant)) in cases.iter().enumerate() {
            let inputs = [
                (rand(dtype, a, 10 + i as u64), false),
                (rand(dtype, b, 50 + i as u64), constant),
            ];
            check(
                &dev,
                &format!("MatMul {a:?}·{b:?} ta={ta} tb={tb}"),
                &layer(ta, tb),
                &inputs,
            );
        }
    }
}

#[test]
fn matmul_rejects_mismatched_shapes() {
    let Some(dev) = device_or_skip() else { return };
    let l = layer(false, false);
    let inputs = [
        (rand(DType::F32, &[3, 5], 1), false),
        (rand(DType::F32, &[5, 4], 2), false),
    ];
    let bad = [
        (rand(DType::F32, &[3, 5], 1), false),
        (rand(DType::F32, &[6, 4], 2), false),
    ];
    let out = [rand(DType::F32, &[3, 4], 3)];
    assert!(gpu(&dev, &l, &inputs, &out).is_ok());
    let err = gpu_with_prepared_shapes(&dev, &l, &inputs, &bad, &out).unwrap_err();
    assert!(err.contains("inner dimensions"), "{err}");
    let wrong_out = [rand(DType::F32, &[3, 5], 3)];
    let err = gpu(&dev, &l, &inputs, &wrong_out).unwrap_err();
    assert!(err.contains("output"), "{err}");
}

/// Prepares for `prepared` and executes on `run`'s tensors (a shape change at run time).
fn gpu_with_prepared_shapes(
    dev: &torchtrt_cuda::CudaDevice,
    l: &LayerKind,
    prepared: &[crate::harness::Input],
    run: &[crate::harness::Input],
    out: &[torchtrt_core::Tensor],
) -> Result<Vec<torchtrt_core::Tensor>, String> {
    assert!(crate::harness::supported(dev, l, prepared));
    gpu(dev, l, run, out)
}

#[test]
fn matmul_declines_integers() {
    let Some(dev) = device_or_skip() else { return };
    let t = torchtrt_core::Tensor::from_vec(&[2, 2], vec![1i32, 2, 3, 4]).unwrap();
    let inputs = [(t.clone(), false), (t, false)];
    assert!(!crate::harness::supported(
        &dev,
        &layer(false, false),
        &inputs
    ));
}

/// A's shape, B's shape (2-D, constant), transpose B.
type BiasShapes = (&'static [usize], &'static [usize], bool);

#[test]
fn matmul_with_a_bias_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let cases: &[BiasShapes] = &[
        (&[3, 5], &[5, 7], false),
        (&[2, 3, 17, 33], &[33, 9], false),
        (&[4, 64], &[80, 64], true),
        (&[7], &[7, 3], false),
        (&[2, 65, 130], &[130, 67], false),
        (&[1, 1, 24], &[40, 24], true),
    ];
    for &dtype in &DTYPES {
        for (i, &(a, b, tb)) in cases.iter().enumerate() {
            let n = if tb { b[0] } else { b[1] };
            let inputs = [
                (rand(dtype, a, 20 + i as u64), false),
                (rand(dtype, b, 60 + i as u64), true),
                (rand(dtype, &[n], 90 + i as u64), true),
            ];
            let l = layer(false, tb);
            assert!(crate::harness::supported(&dev, &l, &inputs), "{a:?}·{b:?}");
            check(
                &dev,
                &format!("MatMul {a:?}·{b:?}+bias tb={tb}"),
                &l,
                &inputs,
            );
            let mut out: Vec<usize> = a[..a.len() - 1].to_vec();
            out.push(n);
            let mut with_residual = inputs.to_vec();
            with_residual.push((rand(dtype, &out, 120 + i as u64), false));
            assert!(crate::harness::supported(&dev, &l, &with_residual));
            check(
                &dev,
                &format!("MatMul {a:?}·{b:?}+bias+residual"),
                &l,
                &with_residual,
            );
        }
    }
}

#[test]
fn matmul_with_a_bias_declines_what_is_not_one_product() {
    let Some(dev) = device_or_skip() else { return };
    let f = DType::F32;
    let batched_b = [
        (rand(f, &[2, 3, 5], 1), false),
        (rand(f, &[2, 5, 4], 2), true),
        (rand(f, &[4], 3), true),
    ];
    assert!(!crate::harness::supported(
        &dev,
        &layer(false, false),
        &batched_b
    ));
    let plain = [
        (rand(f, &[3, 5], 1), false),
        (rand(f, &[5, 4], 2), true),
        (rand(f, &[4], 3), true),
    ];
    assert!(!crate::harness::supported(
        &dev,
        &layer(true, false),
        &plain
    ));
    let wrong_bias = [
        (rand(f, &[3, 5], 1), false),
        (rand(f, &[5, 4], 2), true),
        (rand(f, &[5], 3), true),
    ];
    let out = [rand(f, &[3, 4], 4)];
    let err = gpu(&dev, &layer(false, false), &wrong_bias, &out).unwrap_err();
    assert!(err.contains("bias"), "{err}");
}
