//! `examples/plugin_c`: the ScaleBias plugin written in plain C, built with its Makefile,
//! loaded into the registry, used in engines (built by hand, imported from ONNX through the
//! plugin fallback, and run through the C API) and checked against a plain reference.

mod capi_support;

use std::ffi::CStr;
use std::path::PathBuf;
use std::process::Command;
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use capi_support::onnx_model::{custom_node, floats_attr, model_bytes, value};
use capi_support::{assert_close, host_tensor, random_f32, run_ok, scratch_dir, workspace_root};
use torchtrt::capi::*;
use torchtrt::plugin_api::abi::TTRT_OK;
use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, Runtime, Tensor, registry};

fn key() -> PluginKey {
    PluginKey::new("example_c", "ScaleBias", "1")
}

/// Builds the example with its Makefile (once per process) and loads it.
fn library() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let out = scratch_dir("plugin-c");
        let mut make = Command::new("make");
        make.arg("-C")
            .arg(workspace_root().join("examples/plugin_c"))
            .arg(format!("OUT={}", out.display()));
        run_ok(&mut make, "make examples/plugin_c");
        let lib = out.join("libtorchtrt_example_plugin_c.so");
        let info = Runtime::new().unwrap().load_plugins(&lib).unwrap();
        assert_eq!(info.provider, "torchtrt_example_plugin_c 0.1.0");
        assert_eq!(info.registered, vec![key()]);
        lib
    })
}

/// `y = x * scale[c] + bias[c]` with `c` the index along `axis`.
fn reference(x: &[f32], shape: &[usize], axis: usize, scale: &[f32], bias: &[f32]) -> Vec<f32> {
    let inner: usize = shape[axis + 1..].iter().product();
    let channels = shape[axis];
    x.iter()
        .enumerate()
        .map(|(i, v)| {
            let c = (i / inner) % channels;
            v * scale[c] + bias[c]
        })
        .collect()
}

fn fields(scale: &[f32], bias: &[f32], axis: i32) -> FieldCollection {
    FieldCollection::new()
        .with("scale", scale.to_vec())
        .with("bias", bias.to_vec())
        .with("axis", axis)
}

#[test]
fn c_plugin_runs_in_an_engine_with_dynamic_shapes() {
    library();
    let scale = random_f32(4, 1);
    let bias = random_f32(4, 2);
    for axis in [1, -2] {
        let mut net = NetworkDefinition::new();
        let x = net
            .add_input(
                "x",
                DType::F32,
                &[
                    Dim::dynamic("n", 1, 2, 8),
                    4.into(),
                    Dim::dynamic("w", 1, 3, 9),
                ],
            )
            .unwrap();
        let y = net
            .add_plugin("sb", registry(), &key(), &fields(&scale, &bias, axis), &[x])
            .unwrap();
        net.mark_output(y[0], "y").unwrap();
        let engine = torchtrt::compile(&net, &BuildConfig::default()).unwrap();
        let summary = engine.summary().to_string();
        assert!(
            summary.contains("libtorchtrt_example_plugin_c.so"),
            "{summary}"
        );
        let engine = Runtime::new()
            .unwrap()
            .deserialize(&engine.serialize())
            .unwrap();
        let mut ctx = engine.create_context().unwrap();
        for (seed, shape) in [[3usize, 4, 7], [1, 4, 1], [8, 4, 9]].iter().enumerate() {
            let xs = random_f32(shape.iter().product(), 10 + seed as u64);
            let want = reference(&xs, shape, 1, &scale, &bias);
            let out = ctx
                .execute(&[&Tensor::from_vec(shape, xs).unwrap()])
                .unwrap();
            assert_eq!(out[0].shape(), shape);
            assert_close(out[0].as_slice::<f32>().unwrap(), &want, 1e-6, 1e-6);
        }
    }
}

#[test]
fn c_plugin_refuses_bad_fields_and_shapes_with_its_message() {
    library();
    let err = registry()
        .create(&key(), "sb", &fields(&[1.0, 2.0], &[0.5], 1))
        .err()
        .expect("lengths differ");
    assert!(err.to_string().contains("same nonzero length"), "{err}");
    let err = registry()
        .create(&key(), "sb", &fields(&[f32::INFINITY], &[0.5], 1))
        .err()
        .expect("not finite");
    assert!(err.to_string().contains("must be finite"), "{err}");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[2.into(), 5.into()])
        .unwrap();
    let err = net
        .add_plugin(
            "sb",
            registry(),
            &key(),
            &fields(&[1.0; 4], &[0.0; 4], 1),
            &[x],
        )
        .and_then(|y| {
            net.mark_output(y[0], "y")?;
            torchtrt::compile(&net, &BuildConfig::default())
        })
        .err()
        .expect("5 channels, 4 scales");
    assert!(
        err.to_string().contains("the input has 5 channels"),
        "{err}"
    );
}

#[test]
fn onnx_node_imports_as_the_c_plugin_and_runs_through_the_c_api() {
    library();
    let scale = random_f32(3, 4);
    let bias = random_f32(3, 5);
    let bytes = model_bytes(
        vec![custom_node(
            "example_c",
            "ScaleBias",
            &["image"],
            "y",
            vec![floats_attr("scale", &scale), floats_attr("bias", &bias)],
        )],
        vec![],
        value("image", &[Some(2), Some(3), Some(4)]),
        value("y", &[Some(2), Some(3), Some(4)]),
        &[("example_c", 1)],
    );
    let mut rt = null_mut();
    let mut engine = null_mut();
    let mut ctx = null_mut();
    let mut x = random_f32(24, 6);
    let want = reference(&x, &[2, 3, 4], 1, &scale, &bias);
    let mut y = vec![0f32; 24];
    let input = host_tensor(Some(c"image"), 0, &[2, 3, 4], &mut x);
    let mut output = host_tensor(Some(c"y"), 0, &[], &mut y);
    let path = std::ffi::CString::new(library().to_str().unwrap()).unwrap();
    // SAFETY: valid handles, strings and buffers of the sizes given.
    let statuses = unsafe {
        [
            ttrt_runtime_create(&mut rt),
            ttrt_runtime_load_library(rt, path.as_ptr()),
            ttrt_compile_onnx(rt, bytes.as_ptr().cast(), bytes.len(), null(), &mut engine),
            ttrt_context_create(engine, &mut ctx),
            ttrt_context_execute(ctx, &input, 1, &mut output, 1, null_mut()),
        ]
    };
    // SAFETY: a NUL-terminated string from the library.
    let message = unsafe { CStr::from_ptr(ttrt_last_error()) }.to_string_lossy();
    assert_eq!(statuses, [TTRT_OK; 5], "{message}");
    assert_close(&y, &want, 1e-6, 1e-6);
    // SAFETY: handles from this test, destroyed once.
    unsafe {
        ttrt_context_destroy(ctx);
        ttrt_engine_destroy(engine);
        ttrt_runtime_destroy(rt);
    }
}
