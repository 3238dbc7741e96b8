//! A plugin written in plain C (`tests/c/scale_shift.c`), loaded with `Extension::load` and
//! used through the Rust traits: key, schema, field validation, symbolic shapes, enqueue
//! against a reference, serialization and clone.

mod common;

use std::sync::{Arc, OnceLock};

use common::{Buffer, assert_close, run_cpu};
use proptest::prelude::*;
use torchtrt_plugin_api::abi::Extension;
use torchtrt_plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, FieldSpec, FieldType, Plugin, PluginCreator,
    PluginError, PluginKey, PortDesc, TensorDesc, const_shape, create_plugin,
};

fn extension() -> &'static Extension {
    static EXT: OnceLock<Extension> = OnceLock::new();
    EXT.get_or_init(|| {
        Extension::load(common::shared_library("scale_shift", &[])).expect("scale_shift loads")
    })
}

fn creator() -> Arc<dyn PluginCreator> {
    extension().creators().remove(0)
}

fn fields(scale: f32, shift: f32, repeat: i32) -> FieldCollection {
    FieldCollection::new()
        .with("scale", scale)
        .with("shift", shift)
        .with("repeat", repeat)
}

fn reference(x: &[f32], inner: usize, scale: f32, shift: f32, repeat: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len() * repeat);
    for row in x.chunks(inner) {
        for _ in 0..repeat {
            y.extend(row.iter().map(|v| scale * v + shift));
        }
    }
    y
}

fn run(plugin: &dyn Plugin, shape: &[i64], x: &[f32]) -> Vec<f32> {
    let input = TensorDesc::new(DType::F32, shape.to_vec());
    let out_shape = plugin.output_shapes(&[const_shape(shape)]).expect("shapes")[0]
        .iter()
        .map(|d| d.as_const().expect("constant"))
        .collect::<Vec<_>>();
    let out = TensorDesc::new(DType::F32, out_shape);
    let outs = run_cpu(plugin, &[(input, Buffer::from_values(x))], &[out]).expect("enqueue");
    outs[0].values()
}

#[test]
fn extensions_creators_and_plugins_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Extension>();
    send_sync::<torchtrt_plugin_api::abi::ForeignCreator>();
    send_sync::<torchtrt_plugin_api::abi::ForeignPlugin>();
    let p = create_plugin(creator().as_ref(), "l", &fields(2.0, 0.5, 2)).expect("valid fields");
    let x: Vec<f32> = (1..=6).map(|i| i as f32 * 0.5).collect();
    let want = reference(&x, 3, 2.0, 0.5, 2);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| assert_eq!(run(p.as_ref(), &[2, 3], &x), want));
        }
    });
}

#[test]
fn key_provider_and_schema_read_back() {
    let ext = extension();
    assert_eq!(ext.provider(), "scale_shift_c 1.0");
    assert!(ext.path().ends_with("libscale_shift_.so"));
    assert_eq!(ext.creators().len(), 1);
    let c = creator();
    assert_eq!(c.key(), PluginKey::new("test_c", "ScaleShift", "1"));
    let schema = vec![
        FieldSpec::required("scale", FieldType::F32, "multiplier").scalar(),
        FieldSpec::with_default("shift", 0.0f32, "added after scaling").scalar(),
        FieldSpec::with_default("repeat", 1i32, "times the last axis is tiled").scalar(),
    ];
    assert_eq!(c.field_schema(), schema);
}

#[test]
fn create_checks_fields_by_schema_and_by_the_plugin() {
    let c = creator();
    let key = c.key();
    let missing = create_plugin(c.as_ref(), "l", &FieldCollection::new()).err();
    assert_eq!(
        missing,
        Some(PluginError::MissingField {
            key: key.clone(),
            field: "scale".into()
        })
    );
    let wrong = create_plugin(c.as_ref(), "l", &FieldCollection::new().with("scale", 2i32)).err();
    assert!(matches!(wrong, Some(PluginError::WrongFieldType { .. })));
    let unknown = FieldCollection::new()
        .with("scale", 2.0f32)
        .with("gain", 1.0f32);
    let unknown = create_plugin(c.as_ref(), "l", &unknown).err();
    assert!(matches!(unknown, Some(PluginError::UnknownField { .. })));
    let Err(PluginError::InvalidInput(msg)) =
        create_plugin(c.as_ref(), "layer7", &fields(f32::NAN, 0.0, 1))
    else {
        panic!("a NaN scale is refused by the C plugin");
    };
    assert!(msg.contains("scale and shift must be finite"), "{msg}");
    assert!(
        msg.contains("test_c::ScaleShift@1") && msg.contains("layer7"),
        "{msg}"
    );
}

#[test]
fn output_shapes_are_symbolic_and_fold() {
    let p = create_plugin(creator().as_ref(), "l", &fields(2.0, 1.0, 3)).expect("valid fields");
    assert_eq!(p.num_outputs(), 1);
    assert_eq!(p.output_dtypes(&[DType::F32]), Ok(vec![DType::F32]));
    let n = DimExpr::sym("n");
    let w = DimExpr::sym("w");
    let shapes = p.output_shapes(&[vec![n.clone(), DimExpr::Const(4), w.clone() + 1]]);
    assert_eq!(shapes, Ok(vec![vec![n, DimExpr::Const(4), (w + 1) * 3]]));
    assert_eq!(
        p.output_shapes(&[const_shape(&[2, 5])]),
        Ok(vec![const_shape(&[2, 15])])
    );
    let f32_io = [PortDesc::linear(DType::F32), PortDesc::linear(DType::F32)];
    assert!(p.supports(0, &f32_io, 1, DeviceKind::Cpu));
    assert!(!p.supports(0, &f32_io, 1, DeviceKind::Cuda));
    assert!(!p.supports(0, &[PortDesc::linear(DType::F16)], 1, DeviceKind::Cpu));
    assert!(!p.supports(2, &f32_io, 1, DeviceKind::Cpu));
    assert!(p.output_shapes(&[vec![]]).is_err());
}

#[test]
fn serialize_recreate_and_clone_give_the_same_output() {
    let c = creator();
    let p = create_plugin(c.as_ref(), "l", &fields(-1.5, 0.25, 2)).expect("valid fields");
    let saved = p.fields_to_serialize();
    assert_eq!(saved, fields(-1.5, 0.25, 2));
    let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.7 - 3.1).collect();
    let want = run(p.as_ref(), &[3, 4], &x);
    let again = create_plugin(c.as_ref(), "l2", &saved).expect("recreated");
    assert_eq!(run(again.as_ref(), &[3, 4], &x), want);
    let copy = p.clone_plugin();
    drop(p);
    assert_eq!(copy.fields_to_serialize(), saved);
    assert_eq!(run(copy.as_ref(), &[3, 4], &x), want);
}

#[test]
fn plugins_keep_their_library_loaded() {
    let path = common::shared_library("scale_shift", &["-DSEPARATE_COPY"]);
    let mapped = || {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("Linux process maps");
        maps.contains(path.to_str().expect("UTF-8 path"))
    };
    let c = Extension::load(&path).expect("loads").creators().remove(0);
    let p = create_plugin(c.as_ref(), "l", &fields(3.0, -1.0, 1)).expect("valid fields");
    drop(c);
    assert!(mapped());
    let x = [1.0f32, -2.0, 0.5];
    assert_eq!(run(p.as_ref(), &[3], &x), vec![2.0, -7.0, 0.5]);
    drop(p);
    assert!(!mapped(), "the last plugin unloads the library");
}

#[test]
fn enqueue_checks_buffers_against_descriptions() {
    let p = create_plugin(creator().as_ref(), "l", &fields(1.0, 0.0, 1)).expect("valid fields");
    let input = TensorDesc::new(DType::F32, vec![4]);
    let short = Buffer::from_values(&[1.0f32, 2.0, 3.0]);
    let out = TensorDesc::new(DType::F32, vec![4]);
    let err = run_cpu(p.as_ref(), &[(input, short)], &[out]).err();
    assert!(matches!(err, Some(PluginError::InvalidInput(m)) if m.contains("holds 12 bytes")));
}

fn case() -> impl Strategy<Value = (Vec<i64>, Vec<f32>, f32, f32, i32)> {
    (
        prop::collection::vec(1i64..5, 1..4),
        -4.0f32..4.0,
        -2.0f32..2.0,
        1i32..4,
    )
        .prop_flat_map(|(shape, scale, shift, repeat)| {
            let n = shape.iter().product::<i64>() as usize;
            let x = prop::collection::vec(-10.0f32..10.0, n);
            (Just(shape), x, Just(scale), Just(shift), Just(repeat))
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn enqueue_matches_the_reference((shape, x, scale, shift, repeat) in case()) {
        let p = create_plugin(creator().as_ref(), "l", &fields(scale, shift, repeat)).expect("valid");
        let inner = *shape.last().expect("rank >= 1") as usize;
        let want = reference(&x, inner, scale, shift, repeat as usize);
        assert_close(&run(p.as_ref(), &shape, &x), &want, 1e-5);
    }
}
