//! The facade's CUDA entry points: `backend_for` / `compile_for` / `cuda_context`. Without a
//! GPU, asking for one is a clear "no CUDA device" error; with one, a network of core and
//! plugin layers compiles for `cuda:0`, stores its compiled programs (the plugins' included),
//! reloads through `Runtime`, and its device-resident context matches the CPU engine.

mod common;

use common::{assert_close, random_f32};
use torchtrt::plugin_api::{DType, FieldCollection, PluginKey};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, Tensor, layers};

fn network() -> NetworkDefinition {
    torchtrt::init_plugins().expect("plugins");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), 3.into(), 10.into(), 10.into()],
        )
        .expect("x");
    let w = net
        .add_constant(
            "w",
            Tensor::from_vec(&[5, 3, 3, 3], random_f32(135, 1)).expect("w"),
        )
        .expect("w");
    let c = net
        .add_layer("conv", layers::Convolution::new(2), &[x, w])
        .expect("conv")[0];
    let up = FieldCollection::new()
        .with("mode", "bilinear")
        .with("scales", vec![2.0f64, 2.0])
        .with("use_scales", 1i32);
    let u = net
        .add_plugin(
            "up",
            torchtrt::registry(),
            &PluginKey::new("torch_tensorrt", "Interpolate", "1"),
            &up,
            &[c],
        )
        .expect("up")[0];
    net.mark_output(u, "y").expect("y");
    net
}

#[test]
fn device_names_are_checked() {
    assert!(torchtrt::backend_for("cpu").is_ok());
    for bad in ["gpu", "cuda:", "cuda:-1", "CUDA"] {
        let err = torchtrt::backend_for(bad)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("is not `cpu`, `cuda` or `cuda:N`"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn cuda_without_a_gpu_is_a_clear_error() {
    if torchtrt::cuda::probe::available() {
        println!("skipped: a CUDA device is present");
        return;
    }
    let err = torchtrt::backend_for("cuda")
        .err()
        .expect("no GPU")
        .to_string();
    assert!(err.contains("no CUDA device"), "{err}");
    let err = torchtrt::compile_for(&network(), &BuildConfig::default(), "cuda:0")
        .err()
        .expect("no GPU")
        .to_string();
    assert!(err.contains("no CUDA device"), "{err}");
    let cpu = torchtrt::compile(&network(), &BuildConfig::default()).expect("cpu engine");
    assert_eq!(cpu.create_context().expect("context").device(), "cpu");
}

#[test]
fn compile_for_cuda_stores_programs_and_runs_device_resident() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let net = network();
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), "cuda").expect("compiles");
    let blobs: Vec<String> = engine.blobs().into_iter().map(|b| b.name).collect();
    assert!(
        blobs
            .iter()
            .any(|b| b.starts_with("cuda/plugins/interpolate-")),
        "the plugin's program is stored: {blobs:?}"
    );
    let reloaded = torchtrt::Runtime::new()
        .expect("runtime")
        .deserialize(&engine.serialize())
        .expect("reloads");
    let cpu = torchtrt::compile_for(&net, &BuildConfig::default(), "cpu").expect("cpu");
    let x = Tensor::from_vec(&[3, 3, 10, 10], random_f32(900, 2)).expect("x");
    let want = cpu
        .create_context()
        .unwrap()
        .execute(&[&x])
        .expect("cpu runs");
    let mut ctx = reloaded.create_context().expect("context");
    assert_eq!(ctx.device(), "cuda:0");
    let got = ctx.execute(&[&x]).expect("cuda runs");
    assert_eq!(got[0].shape(), want[0].shape());
    assert_close(
        got[0].as_slice::<f32>().expect("f32"),
        want[0].as_slice::<f32>().expect("f32"),
        1e-5,
        1e-4,
    );
}
