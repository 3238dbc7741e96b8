mod common;

use std::sync::Arc;

use common::{ScaleCreator, add_scale, backends, fresh_registry, random_f32};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{
    BuildConfig, Dim, Engine, EngineLoader, Error, NetworkDefinition, OnDuplicate, PluginRegistry,
    Tensor, build,
};

fn registry_with_scale() -> &'static PluginRegistry {
    let r = fresh_registry();
    r.register(Arc::new(ScaleCreator), "tests 1.0", OnDuplicate::Error)
        .unwrap();
    r
}

/// x → Scale(2, 1) → Scale(-0.5, 0.25) → y, plus a constant output.
fn small_engine(registry: &PluginRegistry) -> Engine {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 4, 8), Dim::Fixed(3)],
        )
        .unwrap();
    let a = add_scale(&mut net, registry, "scale_a", x, 2.0, 1.0);
    let b = add_scale(&mut net, registry, "scale_b", a, -0.5, 0.25);
    let c = net
        .add_constant(
            "table",
            Tensor::from_vec(&[2, 2], vec![1.5f32, -2.0, 3.25, 4.0]).unwrap(),
        )
        .unwrap();
    let unused = add_scale(&mut net, registry, "dead", x, 9.0, 9.0);
    let _ = unused;
    net.mark_output(b, "y").unwrap();
    net.mark_output(c, "table").unwrap();
    build(&net, &BuildConfig::default(), &backends()).unwrap()
}

fn expected(x: &[f32]) -> Vec<f32> {
    x.iter().map(|v| (v * 2.0 + 1.0) * -0.5 + 0.25).collect()
}

#[test]
fn builds_removes_dead_layers_and_runs() {
    let registry = registry_with_scale();
    let engine = small_engine(registry);
    assert!(engine.plan().layers.iter().all(|l| l.name != "dead"));
    let x = random_f32(15, 1);
    let input = Tensor::from_vec(&[5, 3], x.clone()).unwrap();
    let outs = engine.create_context().unwrap().execute(&[&input]).unwrap();
    assert_eq!(outs[0].shape(), &[5, 3]);
    assert_eq!(outs[0].as_slice::<f32>().unwrap(), expected(&x).as_slice());
    assert_eq!(outs[1].as_slice::<f32>().unwrap(), &[1.5, -2.0, 3.25, 4.0]);
}

#[test]
fn serialize_roundtrip_gives_same_outputs() {
    let registry = registry_with_scale();
    let engine = small_engine(registry);
    let bytes = engine.serialize();
    let runtime = EngineLoader::with_registry(backends(), registry);
    let loaded = runtime.deserialize(&bytes).unwrap();
    assert_eq!(loaded.serialize(), bytes, "serialization is deterministic");
    let input = Tensor::from_vec(&[8, 3], random_f32(24, 2)).unwrap();
    let a = engine.create_context().unwrap().execute(&[&input]).unwrap();
    let b = loaded.create_context().unwrap().execute(&[&input]).unwrap();
    assert_eq!(a, b);
    let summary = loaded.summary().to_string();
    assert!(summary.contains("test::Scale@1"), "{summary}");
    assert!(summary.contains("deployment needs: tests 1.0"), "{summary}");
}

#[test]
fn every_truncation_is_an_error() {
    let registry = registry_with_scale();
    let bytes = small_engine(registry).serialize();
    let runtime = EngineLoader::with_registry(backends(), registry);
    for len in 0..bytes.len() {
        let err = runtime
            .deserialize(&bytes[..len])
            .err()
            .expect("truncated engine loads");
        assert!(matches!(err, Error::Engine(_)), "len {len}: {err}");
    }
}

#[test]
fn random_byte_flips_are_errors_not_panics() {
    let registry = registry_with_scale();
    let bytes = small_engine(registry).serialize();
    let runtime = EngineLoader::with_registry(backends(), registry);
    let mut state = 0x9e3779b97f4a7c15u64;
    for _ in 0..4000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut copy = bytes.clone();
        let pos = (state % copy.len() as u64) as usize;
        let flip = ((state >> 32) as u8) | 1;
        copy[pos] ^= flip;
        assert!(
            runtime.deserialize(&copy).is_err(),
            "flip at {pos} accepted"
        );
    }
}

#[test]
fn other_format_version_and_target_are_named() {
    let registry = registry_with_scale();
    let mut bytes = small_engine(registry).serialize();
    let runtime = EngineLoader::with_registry(backends(), registry);
    bytes[8] = 7;
    let err = runtime.deserialize(&bytes).err().unwrap().to_string();
    assert!(err.contains("format version 7"), "{err}");
    bytes[8] = torchtrt_core::engine::FORMAT_VERSION as u8;
    bytes[12] = 1;
    let err = runtime.deserialize(&bytes).err().unwrap().to_string();
    assert!(err.contains("checksum") || err.contains("cuda"), "{err}");
    let err = runtime
        .deserialize(b"definitely not an engine, but long enough to have a header..........")
        .err()
        .unwrap();
    assert!(err.to_string().contains("magic"), "{err}");
}

#[test]
fn missing_plugin_is_plugin_not_found_with_key() {
    let registry = registry_with_scale();
    let bytes = small_engine(registry).serialize();
    let empty = EngineLoader::with_registry(backends(), fresh_registry());
    match empty.deserialize(&bytes).err().unwrap() {
        Error::PluginNotFound {
            namespace,
            name,
            version,
            library,
        } => {
            assert_eq!(
                (namespace.as_str(), name.as_str(), version.as_str()),
                ("test", "Scale", "1")
            );
            assert_eq!(library.as_deref(), Some("tests 1.0"));
        }
        other => panic!("expected PluginNotFound, got {other}"),
    }
}

#[test]
fn input_errors_name_the_input() {
    let registry = registry_with_scale();
    let engine = small_engine(registry);
    let mut ctx = engine.create_context().unwrap();
    let too_big = Tensor::from_vec(&[9, 3], random_f32(27, 3)).unwrap();
    let err = ctx.execute(&[&too_big]).unwrap_err().to_string();
    assert!(err.contains("`n` = 9") && err.contains("[1, 8]"), "{err}");
    let wrong_dtype = Tensor::zeros(DType::F16, &[2, 3]);
    let err = ctx.execute(&[&wrong_dtype]).unwrap_err().to_string();
    assert!(err.contains("input `x`") && err.contains("f16"), "{err}");
    let wrong_dim = Tensor::zeros(DType::F32, &[2, 4]);
    assert!(ctx.execute(&[&wrong_dim]).is_err());
    let err = ctx
        .execute_named(&[("nope", &wrong_dim)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("no input `nope`"), "{err}");
    assert!(ctx.execute(&[]).is_err());
}

#[test]
fn engines_run_concurrently_on_many_contexts() {
    let registry = registry_with_scale();
    let engine = small_engine(registry);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut ctx = engine.create_context().unwrap();
                for i in 0..50 {
                    let n = 1 + (t + i) % 8;
                    let x = random_f32(n * 3, (t * 100 + i) as u64);
                    let input = Tensor::from_vec(&[n, 3], x.clone()).unwrap();
                    let out = ctx.execute(&[&input]).unwrap();
                    assert_eq!(out[0].as_slice::<f32>().unwrap(), expected(&x).as_slice());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn memory_plan_reuses_buffers() {
    let registry = registry_with_scale();
    let mut net = NetworkDefinition::new();
    let mut t = net.add_input("x", DType::F32, &[Dim::Fixed(1024)]).unwrap();
    for i in 0..6 {
        t = add_scale(&mut net, registry, &format!("s{i}"), t, 1.0, 1.0);
    }
    net.mark_output(t, "y").unwrap();
    let engine = build(&net, &BuildConfig::default(), &backends()).unwrap();
    let mem = &engine.plan().memory;
    assert_eq!(mem.naive_bytes, 5 * 4096);
    assert_eq!(mem.arena_bytes, 2 * 4096, "a chain needs two live buffers");
    let input = Tensor::from_vec(&[1024], random_f32(1024, 5)).unwrap();
    let mut ctx = engine.create_context().unwrap();
    let first = ctx.execute(&[&input]).unwrap();
    let pooled = ctx.pooled_bytes();
    assert!(pooled <= 2 * 4096, "pool holds {pooled}");
    assert_eq!(ctx.execute(&[&input]).unwrap(), first);
    assert_eq!(
        ctx.pooled_bytes(),
        pooled,
        "steady state allocates nothing new"
    );
}
