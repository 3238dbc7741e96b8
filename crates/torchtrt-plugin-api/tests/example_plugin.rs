//! The out-of-tree Rust plugin library `examples/plugin_rust` is built as a real `.so` with
//! its own cargo invocation, loaded with `Extension::load`, and its Swish checked against a
//! reference in f32, f16 and bf16.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;
#[path = "../../torchtrt/tests/common/examples.rs"]
mod examples;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use common::{Buffer, assert_close, run_cpu};
use proptest::prelude::*;
use torchtrt_plugin_api::abi::Extension;
use torchtrt_plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, PluginCreator, PluginError, PluginKey, PortDesc,
    TensorDesc, bf16, create_plugin, f16,
};

/// The example as a built `.so`.
fn build_example() -> PathBuf {
    examples::build_example("plugin_rust", "torchtrt_example_plugin_rust")
}

fn extension() -> &'static Extension {
    static EXT: OnceLock<Extension> = OnceLock::new();
    EXT.get_or_init(|| Extension::load(build_example()).expect("the example loads"))
}

fn swish() -> Arc<dyn PluginCreator> {
    extension().creators().remove(0)
}

#[test]
fn the_example_exports_swish() {
    let ext = extension();
    assert_eq!(ext.provider(), "torchtrt_example_plugin_rust 0.1.0");
    assert_eq!(ext.creators().len(), 1);
    let c = swish();
    assert_eq!(c.key(), PluginKey::new("example", "Swish", "1"));
    let beta = FieldSpec::with_default("beta", 1.0f32, "slope of the sigmoid gate").scalar();
    assert_eq!(c.field_schema(), vec![beta]);
    let p = create_plugin(c.as_ref(), "act", &FieldCollection::new()).expect("beta defaults");
    assert_eq!(
        p.fields_to_serialize(),
        FieldCollection::new().with("beta", 1.0f32)
    );
    for d in [DType::F32, DType::F16, DType::BF16] {
        let io = [PortDesc::linear(d); 2];
        assert!(p.supports(1, &io, 1, DeviceKind::Cpu));
        assert!(!p.supports(1, &io, 1, DeviceKind::Cuda));
    }
    assert!(!p.supports(0, &[PortDesc::linear(DType::I32)], 1, DeviceKind::Cpu));
    let nan = FieldCollection::new().with("beta", f32::NAN);
    let err = create_plugin(c.as_ref(), "act", &nan)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("plugin example::Swish@1: field `beta`: must be finite")
    );
}

fn reference(x: &[f32], beta: f32) -> Vec<f32> {
    x.iter()
        .map(|&v| {
            let v = f64::from(v);
            (v / (1.0 + (-f64::from(beta) * v).exp())) as f32
        })
        .collect()
}

/// Runs Swish on `x` stored as `dtype`; returns the stored input and the output, as f32.
fn run(beta: f32, x: &[f32], dtype: DType) -> Result<(Vec<f32>, Vec<f32>), PluginError> {
    let p = create_plugin(
        swish().as_ref(),
        "act",
        &FieldCollection::new().with("beta", beta),
    )?;
    let desc = TensorDesc::new(dtype, vec![x.len() as i64]);
    let (input, stored): (Buffer, Vec<f32>) = match dtype {
        DType::F16 => {
            let h: Vec<f16> = x.iter().map(|&v| f16::from_f32(v)).collect();
            (
                Buffer::from_values(&h),
                h.iter().map(|v| v.to_f32()).collect(),
            )
        }
        DType::BF16 => {
            let h: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
            (
                Buffer::from_values(&h),
                h.iter().map(|v| v.to_f32()).collect(),
            )
        }
        _ => (Buffer::from_values(x), x.to_vec()),
    };
    let out = run_cpu(p.as_ref(), &[(desc.clone(), input)], &[desc])?.remove(0);
    let y = match dtype {
        DType::F16 => out.values::<f16>().iter().map(|v| v.to_f32()).collect(),
        DType::BF16 => out.values::<bf16>().iter().map(|v| v.to_f32()).collect(),
        _ => out.values::<f32>(),
    };
    Ok((stored, y))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn swish_matches_the_reference_in_every_dtype(
        x in prop::collection::vec(-8.0f32..8.0, 1..200),
        beta in 0.1f32..3.0,
    ) {
        for (dtype, tol) in [(DType::F32, 1e-5), (DType::F16, 1e-2), (DType::BF16, 2e-2)] {
            let (stored, y) = run(beta, &x, dtype).expect("enqueue");
            assert_close(&y, &reference(&stored, beta), tol);
        }
    }
}
