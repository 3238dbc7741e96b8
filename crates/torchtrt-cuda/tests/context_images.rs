//! A CUDA engine carries the GPU programs compiled for it: serialized with the programs of
//! its backend's cache, deserialized into a fresh backend, the programs load from the stored
//! images and running the engine compiles nothing. Skips without a GPU.

mod common;

use std::sync::Arc;

use common::{device_or_skip, random_f32};
use torchtrt_core::layers::{Activation, ActivationKind, Convolution};
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::registry::registry;
use torchtrt_core::{Backend, BuildConfig, Dim, EngineLoader, NetworkDefinition, Tensor, build};
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::CudaBackend;
use torchtrt_cuda::kernels::ProgramSource;

const PROBE: ProgramSource = ProgramSource {
    name: "test_probe",
    source: r#"extern "C" __global__ void probe(float* y, float v) { y[threadIdx.x] = v; }"#,
};

fn network() -> NetworkDefinition {
    torchtrt_plugins::init(registry()).expect("plugins register");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 3), 3.into(), 8.into(), 8.into()],
        )
        .expect("x");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[4, 3, 3, 3], random_f32(108, 3)).expect("w"),
        )
        .expect("w");
    let c = net
        .add_layer("conv", Convolution::new(2), &[x, w])
        .expect("conv")[0];
    let y = net
        .add_layer(
            "sigmoid",
            Activation {
                kind: ActivationKind::Sigmoid,
            },
            &[c],
        )
        .expect("sigmoid")[0];
    net.mark_output(y, "y").expect("y");
    net
}

#[test]
fn engine_programs_load_from_stored_images_without_nvrtc() {
    let Some(_dev) = device_or_skip() else { return };
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let builder = Arc::new(CudaBackend::new(0, cpu.clone()).expect("backend"));
    builder
        .programs()
        .function(&PROBE, "probe")
        .expect("probe compiles");
    let config = BuildConfig {
        device: DeviceKind::Cuda,
        ..BuildConfig::default()
    };
    let engine = build(&network(), &config, &[builder.clone(), cpu.clone()]).expect("builds");
    let x = Tensor::from_vec(&[2, 3, 8, 8], random_f32(384, 4)).expect("x");
    engine
        .create_context()
        .expect("context")
        .execute(&[&x])
        .expect("a first run, as torchtrt::compile_for does, compiles every program");
    let stored: Vec<String> = engine.blobs().into_iter().map(|b| b.name).collect();
    assert!(
        stored.contains(&"cuda/core/test_probe".to_string()),
        "{stored:?}"
    );
    for image in builder.programs().images() {
        let name = format!("cuda/core/{}", image.name);
        assert!(stored.contains(&name), "{name} is not stored: {stored:?}");
    }
    let bytes = engine.serialize();

    let fresh = Arc::new(CudaBackend::new(0, cpu.clone()).expect("fresh backend"));
    let reloaded = EngineLoader::new(vec![fresh.clone()])
        .deserialize(&bytes)
        .expect("deserializes");
    let summary = reloaded.summary().to_string();
    assert!(summary.contains("cuda/core/test_probe"), "{summary}");
    fresh
        .programs()
        .function(&PROBE, "probe")
        .expect("probe loads from its image");
    let mut ctx = reloaded.create_context().expect("context");
    let got = ctx.execute(&[&x]).expect("runs");
    let want = engine
        .create_context()
        .unwrap()
        .execute(&[&x])
        .expect("reference run");
    assert_eq!(got[0].shape(), want[0].shape());
    let (g, w) = (
        got[0].as_slice::<f32>().expect("f32"),
        want[0].as_slice::<f32>().expect("f32"),
    );
    torchtrt_testing::check_floats(g, w, torchtrt_testing::Tol::new(1e-5, 1e-5))
        .unwrap_or_else(|m| panic!("{m}"));
    assert_eq!(
        fresh.programs().compiles(),
        0,
        "every program came from the engine"
    );
}

#[test]
fn images_for_a_newer_architecture_are_refused() {
    let Some(dev) = device_or_skip() else { return };
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let backend = CudaBackend::new(0, cpu).expect("backend");
    let (major, minor) = dev.compute_capability();
    let image = torchtrt_cuda::KernelImage {
        name: "future".into(),
        arch: torchtrt_cuda::Arch {
            major: major + 1,
            minor,
        },
        ptx: Vec::new(),
        cubin: Vec::new(),
    };
    let blob = torchtrt_core::EngineBlob {
        name: "cuda/core/future".into(),
        data: postcard::to_stdvec(&image).expect("encodes"),
    };
    let err = backend.install_blobs(&[blob]).expect_err("refused");
    assert!(err.contains("cuda/core/future"), "{err}");
    let garbage = torchtrt_core::EngineBlob {
        name: "cuda/core/garbage".into(),
        data: vec![0xff; 7],
    };
    let err = backend.install_blobs(&[garbage]).expect_err("refused");
    assert!(err.contains("is not a kernel image"), "{err}");
}
