//! The plugin contract for every built-in creator: documented schemas, complete
//! serialization that re-creates an identical plugin, clones, the capability query, and
//! CUDA launches refused as unsupported. The one-input, one-output float plugins share
//! these checks ([`unary_creators`]); `NonMaxSuppression` (two inputs, two i64 outputs)
//! has its own in `nms.rs`.

#[path = "common/harness.rs"]
mod harness;

use std::collections::HashSet;

use torchtrt_plugin_api::{
    CudaLaunch, DType, DeviceKind, FieldCollection, Launch, Plugin, PluginError, PortDesc,
    TensorDesc, const_shape, create_plugin, shape_values, validate_fields,
};
use torchtrt_plugins::register;

/// The built-in creators whose plugins map one float input to one output of its dtype.
fn unary_creators() -> Vec<std::sync::Arc<dyn torchtrt_plugin_api::PluginCreator>> {
    register::creators()
        .into_iter()
        .filter(|c| c.key().name != "NonMaxSuppression")
        .collect()
}

/// Sample fields and input shape for each built-in one-input plugin.
fn sample(name: &str) -> (FieldCollection, Vec<i64>) {
    match name {
        "Interpolate" => (
            FieldCollection::new()
                .with("mode", "bilinear")
                .with("out_size", vec![6i64, 10]),
            vec![1, 2, 3, 5],
        ),
        "NormalizePlugin" => (
            FieldCollection::new()
                .with("axes", vec![1i32])
                .with("mode", "normalize")
                .with("eps", 1e-12f32),
            vec![2, 3, 4],
        ),
        "InstanceNormalization_TRT" => (
            FieldCollection::new()
                .with("scales", vec![1.5f32, -0.5])
                .with("bias", vec![0.25f32, 2.0])
                .with("relu", 1i32)
                .with("alpha", 0.1f32),
            vec![2, 2, 3, 4],
        ),
        "CustomGeluPluginDynamic" => (
            FieldCollection::new()
                .with("approximate", "tanh")
                .with("bias", vec![0.5f32, -0.5, 1.0]),
            vec![4, 3],
        ),
        other => panic!("add sample fields for the new built-in plugin `{other}`"),
    }
}

/// Runs `plugin` on deterministic f32 data of `shape`, returning the output bytes.
fn output(plugin: &mut dyn Plugin, shape: &[i64]) -> Vec<f64> {
    let n = shape.iter().product::<i64>() as usize;
    harness::run_plugin(
        plugin,
        shape,
        &harness::values(n, 11, -2.0, 2.0),
        DType::F32,
        1,
    )
    .expect("runs")
    .values
}

#[test]
fn schemas_are_documented() {
    for creator in register::creators() {
        let schema = creator.field_schema();
        let names: HashSet<&str> = schema.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names.len(),
            schema.len(),
            "{}: duplicate field",
            creator.key()
        );
        for spec in &schema {
            assert!(
                !spec.doc.trim().is_empty(),
                "{}: `{}` has no doc",
                creator.key(),
                spec.name
            );
        }
    }
}

#[test]
fn serialized_fields_recreate_an_identical_plugin() {
    for creator in unary_creators() {
        let key = creator.key();
        let (fields, shape) = sample(&key.name);
        let mut plugin = create_plugin(creator.as_ref(), "layer", &fields).expect("created");
        let saved = plugin.fields_to_serialize();
        let complete = validate_fields(&key, &creator.field_schema(), &saved).expect("valid");
        for spec in creator.field_schema() {
            if spec.default.is_some() {
                assert!(
                    saved.contains(&spec.name),
                    "{key}: `{}` is not serialized",
                    spec.name
                );
            }
        }
        assert_eq!(
            complete, saved,
            "{key}: serialized fields are not normalised"
        );
        let mut again = create_plugin(creator.as_ref(), "layer", &saved).expect("re-created");
        assert_eq!(again.fields_to_serialize(), saved, "{key}");
        let mut copy = plugin.clone_plugin();
        assert_eq!(copy.fields_to_serialize(), saved, "{key}");
        let want = output(plugin.as_mut(), &shape);
        assert_eq!(output(again.as_mut(), &shape), want, "{key}");
        assert_eq!(output(copy.as_mut(), &shape), want, "{key}");
    }
}

#[test]
fn capability_query_is_cpu_float_same_dtype() {
    for creator in unary_creators() {
        let (fields, _) = sample(&creator.key().name);
        let plugin = create_plugin(creator.as_ref(), "layer", &fields).expect("created");
        for dtype in harness::DTYPES {
            let io = [PortDesc::linear(dtype), PortDesc::linear(dtype)];
            assert!(
                plugin.supports(0, &io, 1, DeviceKind::Cpu),
                "{}",
                creator.key()
            );
            assert!(
                plugin.supports(1, &io, 1, DeviceKind::Cpu),
                "{}",
                creator.key()
            );
            assert!(
                plugin.supports(0, &io, 1, DeviceKind::Cuda),
                "{}",
                creator.key()
            );
            let other = if dtype == DType::F32 {
                DType::F16
            } else {
                DType::F32
            };
            let mixed = [PortDesc::linear(dtype), PortDesc::linear(other)];
            assert!(
                !plugin.supports(1, &mixed, 1, DeviceKind::Cpu),
                "{}",
                creator.key()
            );
            assert_eq!(plugin.output_dtypes(&[dtype]).expect("dtypes"), vec![dtype]);
        }
        let ints = [PortDesc::linear(DType::I32), PortDesc::linear(DType::I32)];
        assert!(
            !plugin.supports(0, &ints, 1, DeviceKind::Cpu),
            "{}",
            creator.key()
        );
        assert!(
            !plugin.supports(2, &ints, 1, DeviceKind::Cpu),
            "{}",
            creator.key()
        );
        assert_eq!(plugin.num_outputs(), 1);
    }
}

#[test]
fn cuda_launches_with_null_pointers_are_refused() {
    for creator in unary_creators() {
        let (fields, shape) = sample(&creator.key().name);
        let plugin = create_plugin(creator.as_ref(), "layer", &fields).expect("created");
        let out = plugin
            .output_shapes(&[const_shape(&shape)])
            .expect("shapes");
        let out = shape_values(&out[0]).expect("constant");
        let input = [torchtrt_plugin_api::DeviceTensor {
            desc: TensorDesc::new(DType::F32, shape),
            ptr: 0,
        }];
        let output = [torchtrt_plugin_api::DeviceTensor {
            desc: TensorDesc::new(DType::F32, out),
            ptr: 0,
        }];
        let e = plugin
            .enqueue(Launch::Cuda(CudaLaunch {
                inputs: &input,
                outputs: &output,
                workspace: 0,
                device: 0,
                stream: std::ptr::null_mut(),
                runtime: &torchtrt_plugin_api::NoCudaRuntime,
                shape_values: &[],
            }))
            .unwrap_err();
        assert!(
            matches!(
                e,
                PluginError::InvalidInput(_) | PluginError::Unsupported(_)
            ),
            "{}: {e}",
            creator.key()
        );
    }
}
