//! An engine built for `cuda:0`: stamped with the device's compute capability, its plugin
//! layers run their CUDA kernels (core layers on the host backend), it serializes and
//! deserializes for the CUDA backend only, and its outputs match the CPU engine's.

mod common;

use std::sync::Arc;

use common::{device_or_skip, random_f32};
use torchtrt_core::plugin_api::{DType, DeviceKind, FieldCollection, PluginKey};
use torchtrt_core::registry::registry;
use torchtrt_core::{
    Backend, BuildConfig, Dim, EngineLoader, NetworkDefinition, Target, Tensor, build,
};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::CudaBackend;

fn network() -> NetworkDefinition {
    torchtrt_plugins::init(registry()).expect("plugins register");
    let reg = registry();
    let key = |ns: &str, name: &str| PluginKey::new(ns, name, "1");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[
                Dim::dynamic("batch", 1, 2, 4),
                8.into(),
                16.into(),
                16.into(),
            ],
        )
        .expect("input");
    let norm = FieldCollection::new()
        .with("scales", random_f32(8, 5))
        .with("bias", random_f32(8, 6))
        .with("relu", 1i32)
        .with("alpha", 0.1f32);
    let n = net
        .add_plugin(
            "inorm",
            reg,
            &key("", "InstanceNormalization_TRT"),
            &norm,
            &[x],
        )
        .expect("inorm")[0];
    let up = FieldCollection::new()
        .with("mode", "bilinear")
        .with("scales", vec![2.0f64, 2.0])
        .with("use_scales", 1i32);
    let u = net
        .add_plugin("up", reg, &key("torch_tensorrt", "Interpolate"), &up, &[n])
        .expect("up")[0];
    let g = net
        .add_plugin(
            "gelu",
            reg,
            &key("", "CustomGeluPluginDynamic"),
            &FieldCollection::new(),
            &[u],
        )
        .expect("gelu")[0];
    net.mark_output(g, "y").expect("output");
    net
}

#[test]
fn cuda_engine_runs_plugins_on_the_gpu_and_matches_cpu() {
    let Some(dev) = device_or_skip() else { return };
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let cuda: Arc<dyn Backend> = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    let net = network();
    let on = |device| BuildConfig {
        device,
        ..BuildConfig::default()
    };
    let gpu_engine =
        build(&net, &on(DeviceKind::Cuda), &[cuda.clone(), cpu.clone()]).expect("builds for cuda");
    let (major, minor) = dev.compute_capability();
    assert_eq!(gpu_engine.target(), Target::Cuda { major, minor });
    assert!(
        gpu_engine
            .plan()
            .devices
            .iter()
            .all(|&d| d == DeviceKind::Cuda)
    );
    let cpu_engine =
        build(&net, &on(DeviceKind::Cpu), std::slice::from_ref(&cpu)).expect("builds for cpu");

    let bytes = gpu_engine.serialize();
    assert!(
        EngineLoader::new(vec![cpu.clone()])
            .deserialize(&bytes)
            .is_err()
    );
    let reloaded = EngineLoader::new(vec![cuda.clone()])
        .deserialize(&bytes)
        .expect("deserializes for cuda");

    let x = Tensor::from_vec(&[2, 8, 16, 16], random_f32(2 * 8 * 256, 9)).expect("input");
    let want = cpu_engine
        .create_context()
        .unwrap()
        .execute(&[&x])
        .expect("cpu runs");
    for engine in [&gpu_engine, &reloaded] {
        let got = engine
            .create_context()
            .unwrap()
            .execute(&[&x])
            .expect("cuda runs");
        let (g, w) = (
            got[0].as_slice::<f32>().expect("f32"),
            want[0].as_slice::<f32>().expect("f32"),
        );
        assert_eq!(got[0].shape(), want[0].shape());
        torchtrt_testing::check_floats(g, w, torchtrt_testing::Tol::new(1e-4, 1e-4))
            .unwrap_or_else(|m| panic!("{m}"));
    }
}
