//! `CustomGeluPluginDynamic` against the f64 reference on random shapes, values, forms,
//! biases and dtypes; accuracy over a dense sweep; parallel chunks that split bias rows;
//! every bad field and input.

#[path = "common/harness.rs"]
mod harness;
#[path = "common/reference.rs"]
mod reference;

use harness::{DTYPES, check_close, rounded, run, values};
use proptest::prelude::*;
use torchtrt_plugin_api::{DType, FieldCollection, PluginError, TensorDesc, create_plugin};
use torchtrt_plugins::gelu::GeluCreator;

fn fields(tanh: bool, bias: Option<Vec<f32>>) -> FieldCollection {
    let f = FieldCollection::new().with("approximate", if tanh { "tanh" } else { "none" });
    match bias {
        Some(b) => f.with("bias", b),
        None => f,
    }
}

/// The reference for `x` (as the plugin sees it in `dtype`) plus an optional bias.
fn expected(x: &[f32], dtype: DType, bias: Option<&[f32]>, tanh: bool) -> Vec<f64> {
    let x = rounded(x, dtype);
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let b = bias.map_or(0.0, |b| f64::from(b[i % b.len()]));
            reference::gelu(v + b, tanh)
        })
        .collect()
}

fn check(
    shape: &[i64],
    seed: u64,
    tanh: bool,
    with_bias: bool,
    threads: usize,
) -> Result<(), String> {
    let n: usize = shape.iter().product::<i64>() as usize;
    let x = values(n, seed, -6.0, 6.0);
    let bias = with_bias.then(|| values(*shape.last().unwrap_or(&1) as usize, seed + 1, -1.0, 1.0));
    for dtype in DTYPES {
        let out = run(
            &GeluCreator,
            &fields(tanh, bias.clone()),
            shape,
            &x,
            dtype,
            threads,
        )
        .map_err(|e| e.to_string())?;
        if out.shape != shape {
            return Err(format!("output shape {:?}", out.shape));
        }
        check_close(
            &out.values,
            &expected(&x, dtype, bias.as_deref(), tanh),
            dtype,
            1.0,
        )?;
    }
    Ok(())
}

proptest! {
    #[test]
    fn matches_reference(
        shape in prop::collection::vec(1i64..9, 1..5),
        seed in any::<u64>(),
        tanh in any::<bool>(),
        with_bias in any::<bool>(),
        threads in 0usize..3,
    ) {
        prop_assert_eq!(check(&shape, seed, tanh, with_bias, threads), Ok(()));
    }
}

#[test]
fn large_tensor_with_bias_split_across_chunks() {
    for tanh in [false, true] {
        assert_eq!(check(&[3, 50_021], 7, tanh, true, 2), Ok(()));
        assert_eq!(check(&[70_001], 8, tanh, false, 2), Ok(()));
    }
}

#[test]
fn dense_sweep_is_accurate_to_1e5_relative_and_1e6_near_zero() {
    let n = 400_001;
    let x: Vec<f32> = (0..n)
        .map(|i| -14.0 + 28.0 * i as f32 / (n - 1) as f32)
        .collect();
    for tanh in [false, true] {
        let out = run(
            &GeluCreator,
            &fields(tanh, None),
            &[n as i64],
            &x,
            DType::F32,
            2,
        )
        .expect("runs");
        let want: Vec<f64> = x
            .iter()
            .map(|&v| reference::gelu(f64::from(v), tanh))
            .collect();
        let bound = |i: usize| if x[i].abs() <= 4.0 { 1.5e-6 } else { 1e-5 };
        torchtrt_testing::check_floats_by(&out.values, &want, |i| {
            torchtrt_testing::Tol::new(bound(i), bound(i) * 1e-30)
        })
        .unwrap_or_else(|m| panic!("tanh={tanh}: {m}"));
    }
}

#[test]
fn special_values() {
    let x = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-30,
        -1e-30,
        80.0,
        -80.0,
    ];
    for tanh in [false, true] {
        let out = run(
            &GeluCreator,
            &fields(tanh, None),
            &[x.len() as i64],
            &x,
            DType::F32,
            1,
        )
        .expect("runs");
        let v = &out.values;
        assert_eq!(v[0], 0.0);
        assert_eq!(v[2], f64::INFINITY);
        assert!(!v[3].is_finite() || v[3] == 0.0, "gelu(-inf) = {}", v[3]);
        assert!(v[4].is_nan());
        assert!((v[5] - 5e-31).abs() < 1e-36);
        assert_eq!(v[7], 80.0);
        assert!(v[8].abs() < 1e-30);
    }
}

fn create_err(f: FieldCollection) -> PluginError {
    match create_plugin(&GeluCreator, "bad_gelu", &f) {
        Ok(_) => panic!("fields {f:?} were accepted"),
        Err(e) => e,
    }
}

#[test]
fn bad_fields_are_refused_at_create() {
    let e = create_err(FieldCollection::new().with("approximate", "fast"));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "approximate"),
        "{e}"
    );
    assert!(e.to_string().contains("CustomGeluPluginDynamic"), "{e}");
    let e = create_err(FieldCollection::new().with("type_id", 3i32));
    assert!(
        matches!(&e, PluginError::InvalidField { field, .. } if field == "type_id"),
        "{e}"
    );
    let e = create_err(FieldCollection::new().with("bias", Vec::<f32>::new()));
    assert!(
        matches!(&e, PluginError::WrongFieldLength { field, .. } if field == "bias"),
        "{e}"
    );
    let e = create_err(FieldCollection::new().with("bias", vec![1i32]));
    assert!(
        matches!(&e, PluginError::WrongFieldType { field, .. } if field == "bias"),
        "{e}"
    );
    let e = create_err(FieldCollection::new().with("approximat", "tanh"));
    assert!(matches!(e, PluginError::UnknownField { .. }), "{e}");
}

#[test]
fn bias_length_mismatch_is_refused_at_configure_and_enqueue() {
    let f = fields(false, Some(vec![0.5; 4]));
    let mut p = create_plugin(&GeluCreator, "gelu", &f).expect("created");
    let bad = TensorDesc::new(DType::F32, vec![2, 5]);
    let e = p
        .configure(std::slice::from_ref(&bad), std::slice::from_ref(&bad))
        .unwrap_err();
    assert!(e.to_string().contains("bias has 4 elements"), "{e}");
    let dynamic = TensorDesc::new(DType::F32, vec![2, -1]);
    p.configure(
        std::slice::from_ref(&dynamic),
        std::slice::from_ref(&dynamic),
    )
    .expect("a dynamic last dimension is checked at enqueue");
    let e = harness::enqueue(p.as_ref(), &bad, &[0u8; 40], &bad, 1).unwrap_err();
    assert!(e.to_string().contains("bias has 4 elements"), "{e}");
    let scalar = TensorDesc::new(DType::F32, vec![]);
    let e = p
        .configure(std::slice::from_ref(&scalar), std::slice::from_ref(&scalar))
        .unwrap_err();
    assert!(e.to_string().contains("scalar"), "{e}");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let p = create_plugin(&GeluCreator, "gelu", &fields(true, None)).expect("created");
    let d = TensorDesc::new(DType::F32, vec![4]);
    let e = harness::enqueue(p.as_ref(), &d, &[0u8; 12], &d, 1).unwrap_err();
    assert!(e.to_string().contains("needs 16 bytes"), "{e}");
    let i32d = TensorDesc::new(DType::I32, vec![4]);
    let e = harness::enqueue(p.as_ref(), &i32d, &[0u8; 16], &i32d, 1).unwrap_err();
    assert!(e.to_string().contains("i32"), "{e}");
    let other = TensorDesc::new(DType::F32, vec![5]);
    let e = harness::enqueue(p.as_ref(), &d, &[0u8; 16], &other, 1).unwrap_err();
    assert!(e.to_string().contains("output shape"), "{e}");
    assert!(p.output_dtypes(&[DType::F32, DType::F32]).is_err());
    assert!(p.output_dtypes(&[DType::I8]).is_err());
}
