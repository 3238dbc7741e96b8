//! Engines whose checksum is valid but whose tables are not: every reader (deserialize and
//! the record-only summary `inspect` uses) refuses them with an error naming the field.

mod common;

use std::sync::Arc;

use common::{ScaleCreator, add_scale, backends, fresh_registry, random_f32};
use torchtrt_core::engine::checksum;
use torchtrt_core::layers::LayerKind;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{
    BuildConfig, Dim, Engine, EngineBlob, EngineLoader, EnginePlan, NetworkDefinition, OnDuplicate,
    PluginRegistry, Tensor, TensorId, build,
};

/// A weight record as the format stores it: dtype, shape, offset, length.
type Record = (DType, Vec<u64>, u64, u64);

fn registry() -> &'static PluginRegistry {
    let r = fresh_registry();
    r.register(Arc::new(ScaleCreator), "tests 1.0", OnDuplicate::Error)
        .unwrap();
    r
}

/// x → Scale → Scale → y, plus two constant outputs (two weights).
fn engine_bytes(registry: &PluginRegistry) -> Vec<u8> {
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
        .add_constant("c", Tensor::from_vec(&[4], random_f32(4, 7)).unwrap())
        .unwrap();
    let d = net
        .add_constant("d", Tensor::from_vec(&[4], random_f32(4, 8)).unwrap())
        .unwrap();
    net.mark_output(b, "y").unwrap();
    net.mark_output(c, "c").unwrap();
    net.mark_output(d, "d").unwrap();
    build(&net, &BuildConfig::default(), &backends())
        .unwrap()
        .serialize()
}

/// Decodes the plan, lets `edit` change it, and writes it back in place with a valid
/// checksum. The edit must keep the plan within the padding before the first weight.
fn rewrite(bytes: &[u8], edit: impl FnOnce(&mut EnginePlan, &mut Vec<Record>)) -> Vec<u8> {
    let meta_len = u64::from_le_bytes(bytes[64..72].try_into().unwrap()) as usize;
    let (mut plan, mut records, blobs): (EnginePlan, Vec<Record>, Vec<EngineBlob>) =
        postcard::from_bytes(&bytes[72..72 + meta_len]).unwrap();
    let first_weight = records.iter().map(|r| r.2).min().unwrap() as usize;
    edit(&mut plan, &mut records);
    let meta = postcard::to_stdvec(&(&plan, &records, &blobs)).unwrap();
    assert!(
        72 + meta.len() <= first_weight,
        "the edit grew the plan too much"
    );
    let mut out = bytes.to_vec();
    out[64..72].copy_from_slice(&(meta.len() as u64).to_le_bytes());
    out[72..first_weight].fill(0);
    out[72..72 + meta.len()].copy_from_slice(&meta);
    let sum = checksum(&out[64..]);
    out[32..40].copy_from_slice(&sum.to_le_bytes());
    out
}

/// Both readers refuse `bytes`; returns the deserialize error, checked to name `field`.
fn refused(registry: &'static PluginRegistry, bytes: &[u8], field: &str) -> String {
    let runtime = EngineLoader::with_registry(backends(), registry);
    let err = runtime
        .deserialize(bytes)
        .err()
        .expect("a bad engine loads")
        .to_string();
    let summary = Engine::summarize_bytes(bytes)
        .map(|_| ())
        .expect_err("inspect accepts a bad engine")
        .to_string();
    assert!(err.contains(field), "{err}");
    assert!(summary.contains(field), "{summary}");
    err
}

#[test]
fn the_rewriter_keeps_a_valid_engine_valid() {
    let registry = registry();
    let bytes = engine_bytes(registry);
    let same = rewrite(&bytes, |_, _| {});
    assert_eq!(same, bytes);
    let engine = EngineLoader::with_registry(backends(), registry)
        .deserialize(&same)
        .unwrap();
    let x = Tensor::from_vec(&[2, 3], random_f32(6, 3)).unwrap();
    let outs = engine.create_context().unwrap().execute(&[&x]).unwrap();
    assert_eq!(outs.len(), 3);
}

#[test]
fn release_list_with_a_missing_tensor_is_refused() {
    let registry = registry();
    let bad = rewrite(&engine_bytes(registry), |plan, _| {
        plan.memory.release_after[0].push(TensorId(100));
    });
    let err = refused(registry, &bad, "memory.release_after[0]");
    assert!(err.contains("tensor #100 does not exist"), "{err}");
}

#[test]
fn release_list_of_an_input_or_output_is_refused() {
    let registry = registry();
    let bytes = engine_bytes(registry);
    let bad = rewrite(&bytes, |plan, _| {
        let x = plan.inputs[0].tensor;
        plan.memory.release_after[0].push(x);
    });
    let err = refused(registry, &bad, "memory.release_after[0]");
    assert!(err.contains("not an activation"), "{err}");
    let bad = rewrite(&bytes, |plan, _| {
        let y = plan.outputs[0].1;
        let last = plan.layers.len() - 1;
        plan.memory.release_after[last].push(y);
    });
    refused(registry, &bad, "memory.release_after[");
}

#[test]
fn release_lists_fewer_than_layers_are_refused() {
    let registry = registry();
    let bad = rewrite(&engine_bytes(registry), |plan, _| {
        plan.memory.release_after.pop();
    });
    refused(registry, &bad, "memory.release_after");
}

#[test]
fn layer_and_output_tensor_ids_are_checked() {
    let registry = registry();
    let bytes = engine_bytes(registry);
    let bad = rewrite(&bytes, |plan, _| plan.layers[0].outputs[0] = TensorId(90));
    refused(registry, &bad, "layers[0].outputs[0]");
    let bad = rewrite(&bytes, |plan, _| plan.outputs[0].1 = TensorId(91));
    refused(registry, &bad, "outputs[0]");
    let bad = rewrite(&bytes, |plan, _| plan.inputs[0].tensor = TensorId(92));
    refused(registry, &bad, "inputs[0]");
    let bad = rewrite(&bytes, |plan, _| {
        plan.devices.pop();
    });
    refused(registry, &bad, "devices");
    let bad = rewrite(&bytes, |plan, _| {
        plan.tensor_dtypes.pop();
    });
    refused(registry, &bad, "tensor_dtypes");
}

#[test]
fn constant_slot_past_the_weights_is_refused() {
    let registry = registry();
    let bad = rewrite(&engine_bytes(registry), |plan, _| {
        for layer in &mut plan.layers {
            if let LayerKind::Constant(c) = &mut layer.kind {
                c.slot = 9;
            }
        }
    });
    let err = refused(registry, &bad, ".slot");
    assert!(err.contains("weight 9 does not exist"), "{err}");
}

#[test]
fn weights_in_the_header_or_overlapping_are_refused() {
    let registry = registry();
    let bytes = engine_bytes(registry);
    let bad = rewrite(&bytes, |_, records| records[0].2 = 0);
    let err = refused(registry, &bad, "weights[0]");
    assert!(err.contains("outside the weight area"), "{err}");
    let bad = rewrite(&bytes, |_, records| records[1].2 = records[0].2);
    let err = refused(registry, &bad, "weights[");
    assert!(err.contains("overlaps"), "{err}");
    let bad = rewrite(&bytes, |_, records| records[1].2 += 1);
    let err = refused(registry, &bad, "weights[1]");
    assert!(err.contains("aligned"), "{err}");
    let bad = rewrite(&bytes, |_, records| records[1].2 = 1 << 40);
    refused(registry, &bad, "weights[1]");
}

#[test]
fn arena_offsets_outside_the_arena_are_refused() {
    let registry = registry();
    let bad = rewrite(&engine_bytes(registry), |plan, _| {
        let arena = plan.memory.arena_bytes;
        plan.memory.offsets[0] = Some(arena + 64);
    });
    refused(registry, &bad, "memory.offsets[0]");
}

#[test]
fn undecodable_plan_names_the_field_and_offset() {
    let registry = registry();
    let bytes = engine_bytes(registry);
    let meta_len = u64::from_le_bytes(bytes[64..72].try_into().unwrap()) as usize;
    let (plan, ..): (EnginePlan, Vec<Record>, Vec<EngineBlob>) =
        postcard::from_bytes(&bytes[72..72 + meta_len]).unwrap();
    let head = postcard::to_stdvec(&(
        plan.target,
        plan.precision,
        &plan.inputs,
        &plan.outputs,
        &plan.tensor_names,
        &plan.tensor_dtypes,
    ))
    .unwrap()
    .len();
    let mut bad = bytes.clone();
    let first_layer = 72 + head + 1;
    bad[first_layer..first_layer + 5].copy_from_slice(&[0xff; 5]);
    let sum = checksum(&bad[64..]);
    bad[32..40].copy_from_slice(&sum.to_le_bytes());
    let err = refused(registry, &bad, "layers[0] (at plan byte");
    assert!(err.contains("cannot decode the plan"), "{err}");
}
