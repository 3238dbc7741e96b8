//! Kernel plugins on CUDA: the example's SwiGLU spec compiled by NVRTC into f32 and f16
//! engines whose two CUDA kernels are timed as tactics, matched against a plain reference,
//! and carried by the engine: a runtime with neither the spec nor any library loads it, with
//! engine host code forbidden (a CUDA engine whose plugin layers run on the GPU carries no
//! CPU code). Skips without a GPU.

mod common;

use torchtrt::kernel_plugin;
use torchtrt::plugin_api::{DType, FieldCollection, PluginCreator};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, PluginRegistry, Tensor};

#[test]
fn cuda_engines_of_a_kernel_plugin_match_and_load_with_nothing_registered() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let spec = common::workspace_root().join("examples/kernel_plugin/swiglu.toml");
    let creator = kernel_plugin::load_spec(&spec).unwrap_or_else(|e| panic!("{e}"));
    let key = creator.key();
    let registry = PluginRegistry::new();
    registry
        .register_kernel_plugin(creator, "swiglu.toml")
        .expect("registers");
    kernel_plugin::set_engine_host_code_allowed(false);
    for (precision, atol, rtol) in [(DType::F32, 1e-5, 1e-4), (DType::F16, 2e-2, 2e-2)] {
        let mut net = NetworkDefinition::new();
        let x = net
            .add_input(
                "x",
                DType::F32,
                &[
                    Dim::dynamic("N", 1, 64, 256),
                    Dim::Fixed(7),
                    Dim::Fixed(512),
                ],
            )
            .expect("x");
        let fields = FieldCollection::new().with("alpha", 1.702f32);
        let y = net
            .add_plugin("swiglu", &registry, &key, &fields, &[x])
            .expect("layer")[0];
        net.mark_output(y, "y").expect("y");
        let config = BuildConfig {
            precision,
            ..BuildConfig::default()
        };
        let engine = torchtrt::compile_for(&net, &config, "cuda").expect("compiles");
        let blobs: Vec<String> = engine.blobs().into_iter().map(|b| b.name).collect();
        assert!(
            blobs
                .iter()
                .any(|b| b.starts_with("cuda/plugins/kernel_plugin_SwiGLU-")),
            "{blobs:?}"
        );
        assert!(blobs.contains(&"kernel-plugins/example::SwiGLU@1".to_string()));
        let tactic = engine.summary().plugins[0].tactic.clone().expect("timed");
        assert!(
            ["thread-per-output", "grid-stride"].contains(&tactic.name.as_str()),
            "{tactic:?}"
        );
        let loaded = torchtrt::Runtime::new()
            .expect("runtime")
            .deserialize(&engine.serialize())
            .unwrap_or_else(|e| panic!("loads without host code: {e}"));
        for (n, seed) in [(64, 1), (3, 2), (256, 3)] {
            let len = n * 7 * 512;
            let values: Vec<f32> = common::random_f32(len, seed)
                .into_iter()
                .map(|v| v * 4.0)
                .collect();
            let x = Tensor::from_vec(&[n, 7, 512], values.clone()).expect("x");
            let mut ctx = loaded.create_context().expect("context");
            assert_eq!(ctx.device(), "cuda:0");
            let got = ctx.execute(&[&x]).expect("runs");
            assert_eq!(got[0].shape(), [n, 7, 256]);
            common::assert_close(
                got[0].as_slice::<f32>().expect("f32"),
                &common::swiglu_reference(&values, 512, 1.702),
                atol,
                rtol,
            );
        }
    }
}

/// An output aliasing its input on CUDA: the host copies the cache into the output on the
/// stream before the kernel writes its row; the cache read after the plugin is unchanged.
#[test]
fn an_aliased_output_on_cuda_starts_as_its_input() {
    if !torchtrt::cuda::probe::available() {
        println!("skipped: no CUDA device");
        return;
    }
    let creator = kernel_plugin::load_spec_text(common::KV_WRITE_SPEC, &[]).expect("loads");
    let registry = PluginRegistry::new();
    registry
        .register_kernel_plugin(creator, "kv_write.toml")
        .expect("registers");
    let (s, d) = (6, 200);
    let net = common::kv_write_network(&registry, s, d);
    let engine = torchtrt::compile_for(&net, &BuildConfig::default(), "cuda").expect("compiles");
    assert_eq!(engine.create_context().expect("context").device(), "cuda:0");
    for (b, p, seed) in [(2, 3, 1), (1, 0, 2), (8, 5, 3), (3, -1, 4), (2, 6, 5)] {
        common::check_kv_write(&engine, b, s, d, p, seed);
    }
}
