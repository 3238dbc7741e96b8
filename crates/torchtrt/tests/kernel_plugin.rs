//! Kernel plugins on the CPU: the example's SwiGLU spec (`examples/kernel_plugin`) compiled
//! by the system C compiler, built into engines of several ranks, checked against a plain
//! reference on random data, timed as tactics, and carried by the engine so that a runtime
//! with neither the spec nor a library loads it — only where engine host code is allowed.
//! Bad specs and bad C are refused with errors naming what is wrong.

mod common;

use std::path::PathBuf;

use torchtrt::kernel_plugin::{self, KernelPluginCreator};
use torchtrt::plugin_api::{
    CpuLaunch, DType, DeviceKind, FieldCollection, HostTensor, HostTensorMut, Launch,
    PluginCreator, TensorDesc, create_plugin,
};
use torchtrt::{BuildConfig, Dim, Engine, NetworkDefinition, PluginRegistry, Tensor};

fn example_spec() -> PathBuf {
    common::workspace_root().join("examples/kernel_plugin/swiglu.toml")
}

fn swiglu() -> KernelPluginCreator {
    kernel_plugin::load_spec(example_spec()).unwrap_or_else(|e| panic!("{e}"))
}

/// An engine computing the plugin on an input of `dims` (the first dynamic), with `alpha`
/// given or left to its default.
fn engine(registry: &PluginRegistry, dims: &[Dim], alpha: Option<f32>) -> Engine {
    let mut net = NetworkDefinition::new();
    let x = net.add_input("x", DType::F32, dims).expect("input");
    let mut fields = FieldCollection::new();
    if let Some(a) = alpha {
        fields.set("alpha", a);
    }
    let key = swiglu().key();
    let out = net
        .add_plugin("swiglu", registry, &key, &fields, &[x])
        .expect("plugin layer");
    net.mark_output(out[0], "y").expect("output");
    torchtrt::compile(&net, &BuildConfig::default()).expect("compiles")
}

fn check(engine: &Engine, shape: &[usize], alpha: f64, seed: u64) {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = common::random_f32(n, seed)
        .into_iter()
        .map(|v| v * 4.0)
        .collect();
    let x = Tensor::from_vec(shape, values.clone()).expect("x");
    let got = engine
        .create_context()
        .expect("context")
        .execute(&[&x])
        .expect("runs");
    let row = shape[shape.len() - 1];
    let mut want_shape = shape.to_vec();
    *want_shape.last_mut().unwrap() = row / 2;
    assert_eq!(got[0].shape(), want_shape);
    common::assert_close(
        got[0].as_slice::<f32>().expect("f32"),
        &common::swiglu_reference(&values, row, alpha),
        1e-6,
        1e-5,
    );
}

/// Held by the tests that change the process-wide engine-host-code permission.
static HOST_CODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn local_registry() -> PluginRegistry {
    let registry = PluginRegistry::new();
    registry
        .register_kernel_plugin(swiglu(), "swiglu.toml")
        .expect("registers");
    registry
}

#[test]
fn kernels_match_the_reference_at_every_rank_and_dynamic_size() {
    let registry = local_registry();
    let e3 = engine(
        &registry,
        &[Dim::dynamic("N", 1, 4, 16), Dim::Fixed(5), Dim::Fixed(64)],
        Some(1.702),
    );
    for (n, seed) in [(4, 1), (1, 2), (16, 3), (7, 4)] {
        check(&e3, &[n, 5, 64], 1.702, seed);
    }
    let e2 = engine(
        &registry,
        &[Dim::dynamic("N", 1, 8, 64), Dim::Fixed(6)],
        None,
    );
    check(&e2, &[33, 6], 1.0, 5);
    let e4 = engine(
        &registry,
        &[
            Dim::Fixed(2),
            Dim::Fixed(3),
            Dim::dynamic("W", 2, 4, 8),
            Dim::Fixed(10),
        ],
        Some(0.5),
    );
    check(&e4, &[2, 3, 7, 10], 0.5, 6);
}

#[test]
fn the_builder_times_both_cpu_kernels_and_keeps_one() {
    let registry = local_registry();
    let e = engine(
        &registry,
        &[Dim::dynamic("N", 1, 64, 64), Dim::Fixed(256)],
        None,
    );
    let summary = e.summary();
    let tactic = summary.plugins[0]
        .tactic
        .clone()
        .expect("a tactic was chosen");
    assert!(
        ["rows", "tanh"].contains(&tactic.name.as_str()),
        "{tactic:?}"
    );
    check(&e, &[64, 256], 1.0, 7);
    assert!(swiglu().capabilities().tactics);
}

/// Each CPU tactic, selected through the plugin API, against the reference (the builder
/// keeps only one, so the other would go unchecked through engines).
#[test]
fn every_cpu_tactic_matches_the_reference() {
    let creator = swiglu();
    let fields = FieldCollection::new().with("alpha", 1.5f32);
    let mut plugin = create_plugin(&creator, "swiglu", &fields).expect("created");
    let (rows, row) = (5usize, 46usize);
    let input = TensorDesc::new(DType::F32, vec![rows as i64, row as i64]);
    let output = TensorDesc::new(DType::F32, vec![rows as i64, (row / 2) as i64]);
    let (ins, outs) = (std::slice::from_ref(&input), std::slice::from_ref(&output));
    plugin.configure(ins, outs).expect("configured");
    let tactics = plugin.tactics(ins, outs, DeviceKind::Cpu);
    let names: Vec<&str> = tactics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["rows", "tanh"]);
    let x: Vec<f32> = common::random_f32(rows * row, 9)
        .into_iter()
        .map(|v| v * 5.0)
        .collect();
    for t in &tactics {
        plugin.set_tactic(t.id).expect("tactic");
        let mut y = vec![f32::NAN; rows * row / 2];
        let inputs = [HostTensor {
            desc: input.clone(),
            data: bytemuck::cast_slice(&x),
        }];
        let mut outputs = [HostTensorMut {
            desc: output.clone(),
            data: bytemuck::cast_slice_mut(&mut y),
        }];
        plugin
            .enqueue(Launch::Cpu(CpuLaunch {
                inputs: &inputs,
                outputs: &mut outputs,
                workspace: &mut [],
                threads: 1,
            }))
            .expect("runs");
        common::assert_close(&y, &common::swiglu_reference(&x, row, 1.5), 1e-6, 1e-5);
    }
    assert!(plugin.set_tactic(3).is_err());
}

#[test]
fn engines_carry_the_plugin_and_load_only_where_host_code_is_allowed() {
    let registry = local_registry();
    let e = engine(
        &registry,
        &[Dim::dynamic("N", 1, 4, 16), Dim::Fixed(32)],
        Some(2.0),
    );
    let bytes = e.serialize();
    let key = swiglu().key();
    assert!(
        torchtrt::registry().get(&key).is_none(),
        "the process registry never saw the spec"
    );
    let runtime = torchtrt::Runtime::new().expect("runtime");
    let _permission = HOST_CODE.lock().unwrap_or_else(|e| e.into_inner());
    kernel_plugin::set_engine_host_code_allowed(false);
    let refused = runtime
        .deserialize(&bytes)
        .err()
        .expect("refused")
        .to_string();
    assert!(refused.contains("example::SwiGLU@1"), "{refused}");
    assert!(
        refused.contains("engine host code is not allowed"),
        "{refused}"
    );
    kernel_plugin::set_engine_host_code_allowed(true);
    let loaded = runtime
        .deserialize(&bytes)
        .expect("loads with nothing registered");
    kernel_plugin::set_engine_host_code_allowed(false);
    check(&loaded, &[9, 32], 2.0, 8);
    assert_eq!(
        loaded.summary().plugins[0].tactic,
        e.summary().plugins[0].tactic
    );
    let again = loaded.serialize();
    assert_eq!(again, bytes, "a loaded engine serializes to the same bytes");
}

#[test]
fn bad_c_is_refused_with_the_compiler_message() {
    let spec = std::fs::read_to_string(example_spec()).expect("spec");
    let c = std::fs::read_to_string(example_spec().with_file_name("swiglu.c")).expect("c");
    let cu = std::fs::read_to_string(example_spec().with_file_name("swiglu.cu")).expect("cu");
    let files = |c: &str| {
        vec![
            ("swiglu.c".to_string(), c.to_string()),
            ("swiglu.cu".to_string(), cu.clone()),
        ]
    };
    kernel_plugin::load_spec_text(&spec, &files(&c)).expect("the example loads from text");
    let syntax = c.replace("out[i] = a[i]", "out[i] = = a[i]");
    let e = kernel_plugin::load_spec_text(&spec, &files(&syntax)).unwrap_err();
    assert!(
        e.contains("example::SwiGLU@1") && e.contains("C compiler"),
        "{e}"
    );
    assert!(e.contains("error"), "{e}");
    let wrong_type = c.replace(
        "void swiglu_rows_f32(const float* x",
        "void swiglu_rows_f32(const double* x",
    );
    let e = kernel_plugin::load_spec_text(&spec, &files(&wrong_type)).unwrap_err();
    assert!(e.contains("incompatible-pointer-types"), "{e}");
    let missing = c.replace("swiglu_tanh_f32", "swiglu_other_f32");
    let e = kernel_plugin::load_spec_text(&spec, &files(&missing)).unwrap_err();
    assert!(e.contains("swiglu_tanh_f32"), "{e}");
    let e = kernel_plugin::load_spec_text(&spec, &[]).unwrap_err();
    assert!(e.contains("source_file `swiglu.c`"), "{e}");
}

#[test]
fn the_same_spec_again_is_a_no_op_and_another_with_its_key_is_refused() {
    let registry = local_registry();
    let before = registry.len();
    registry
        .register_kernel_plugin(swiglu(), "again.toml")
        .expect("the same spec again");
    let spec = std::fs::read_to_string(example_spec()).expect("spec");
    let c = std::fs::read_to_string(example_spec().with_file_name("swiglu.c")).expect("c");
    let cu = std::fs::read_to_string(example_spec().with_file_name("swiglu.cu")).expect("cu");
    let other = kernel_plugin::load_spec_text(
        &spec.replace("default = 1.0", "default = 2.0"),
        &[("swiglu.c".into(), c), ("swiglu.cu".into(), cu)],
    )
    .expect("loads");
    let e = registry
        .register_kernel_plugin(other, "other.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("already registered by `kernel plugin spec swiglu.toml`"),
        "{e}"
    );
    assert_eq!(registry.len(), before);
    let kept = registry.entry(&swiglu().key()).expect("kept");
    assert_eq!(kept.provider, "kernel plugin spec swiglu.toml");
}

/// An output aliasing its input (`alias = "cache"`): it starts as the cache, the kernel
/// writes one row of it, and a layer reading the cache after the plugin still sees it
/// unchanged. Before and after serialisation, several batches, positions in and out of range.
#[test]
fn an_aliased_output_starts_as_its_input_which_stays_unchanged() {
    let creator = kernel_plugin::load_spec_text(common::KV_WRITE_SPEC, &[]).expect("loads");
    assert_eq!(creator.capabilities().names(), ["aliased outputs"]);
    assert_eq!(
        create_plugin(&creator, "kv", &FieldCollection::new())
            .expect("plugin")
            .aliased_input(0),
        Some(0)
    );
    let registry = PluginRegistry::new();
    registry
        .register_kernel_plugin(creator, "kv_write.toml")
        .expect("registers");
    let (s, d) = (5, 24);
    let net = common::kv_write_network(&registry, s, d);
    let engine = torchtrt::compile(&net, &BuildConfig::default()).expect("compiles");
    for (b, p, seed) in [(2, 3, 1), (1, 0, 2), (7, 4, 3), (3, -1, 4), (2, 5, 5)] {
        common::check_kv_write(&engine, b, s, d, p, seed);
    }
    let _permission = HOST_CODE.lock().unwrap_or_else(|e| e.into_inner());
    kernel_plugin::set_engine_host_code_allowed(true);
    let loaded = torchtrt::Runtime::new()
        .expect("runtime")
        .deserialize(&engine.serialize());
    kernel_plugin::set_engine_host_code_allowed(false);
    common::check_kv_write(&loaded.expect("loads"), 4, s, d, 2, 6);
}

#[test]
fn an_alias_of_another_dtype_or_shape_is_refused() {
    let spec = common::KV_WRITE_SPEC;
    let e =
        kernel_plugin::load_spec_text(&spec.replace("alias = \"cache\"", "alias = \"pos\""), &[])
            .unwrap_err();
    assert!(
        e.contains("aliases input `pos` but has another dtype"),
        "{e}"
    );
    let e = kernel_plugin::load_spec_text(
        &spec.replace("alias = \"cache\"", "alias = \"cache\"\nlike = \"cache\""),
        &[],
    )
    .unwrap_err();
    assert!(
        e.contains("an alias") || e.contains("exactly one of"),
        "{e}"
    );
    let e =
        kernel_plugin::load_spec_text(&spec.replace("alias = \"cache\"", "alias = \"kv\""), &[])
            .unwrap_err();
    assert!(e.contains("`alias = \"kv\"` names no input"), "{e}");
}

/// The example's spec built in code (`SpecBuilder`) instead of read from its file: it
/// renders to TOML that passes the same checks, and its engine computes the same function.
/// Text with quotes, backslashes and control characters survives the rendering.
#[test]
fn a_spec_built_in_code_is_the_file_spec() {
    use torchtrt::kernel_plugin::{Device, KernelDef, SpecBuilder};
    let c = std::fs::read_to_string(example_spec().with_file_name("swiglu.c")).expect("c");
    let args = [
        "x",
        "y",
        "numel(x) / x.shape[-1]",
        "x.shape[-1] / 2",
        "alpha",
    ];
    let builder = SpecBuilder::new("built", "SwiGLU", "2")
        .doc("quotes \" backslash \\ newline \n tab \t bell \u{7}")
        .types("T", &[DType::F32, DType::F16])
        .float_field("alpha", Some(1.0), "the sigmoid's scale")
        .input("x", "T")
        .output("y", "T", &["x.shape[:-1]", "x.shape[-1] / 2"])
        .cpu(
            Device::new(&c)
                .types("T", &[DType::F32])
                .cflag("-O3")
                .kernel(KernelDef::new("swiglu_rows_{T}").tactic("rows").args(&args))
                .kernel(KernelDef::new("swiglu_tanh_{T}").tactic("tanh").args(&args)),
        );
    let creator = builder
        .build()
        .unwrap_or_else(|e| panic!("{e}\n{}", builder.to_toml()));
    assert_eq!(
        creator.spec().doc,
        "quotes \" backslash \\ newline \n tab \t bell \u{7}"
    );
    assert_eq!(creator.key().to_string(), "built::SwiGLU@2");
    assert!(creator.capabilities().tactics);
    let registry = PluginRegistry::new();
    registry
        .register_kernel_plugin(creator, "built in code")
        .expect("registers");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("N", 1, 4, 8), Dim::Fixed(30)],
        )
        .expect("x");
    let key = torchtrt::plugin_api::PluginKey::new("built", "SwiGLU", "2");
    let fields = FieldCollection::new().with("alpha", 0.75f32);
    let y = net
        .add_plugin("swiglu", &registry, &key, &fields, &[x])
        .expect("layer")[0];
    net.mark_output(y, "y").expect("y");
    let engine = torchtrt::compile(&net, &BuildConfig::default()).expect("compiles");
    check(&engine, &[6, 30], 0.75, 10);
    let bad = SpecBuilder::new("built", "Bad", "1")
        .input("x", "f32")
        .output_like("y", "f32", "z");
    assert!(
        bad.build()
            .unwrap_err()
            .contains("`like = \"z\"` names no input")
    );
}
