//! Rust creators exported through the C tables (`export_plugins!`) and read back through
//! the host wrappers (`Extension::from_entry`), without a dlopen: everything a Rust plugin
//! says must come back unchanged, and a panic must come back as `PluginError::Panic`.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::Arc;

use common::{Buffer, assert_close, run_cpu};
use proptest::prelude::*;
use torchtrt_plugin_api::abi::{
    Extension, TTRT_ERROR_INVALID_ARGUMENT, TtrtErrorBuf, TtrtExtension, TtrtPlugin,
};
use torchtrt_plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, FieldSpec, FieldType, Launch, Plugin,
    PluginCreator, PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, TensorDesc,
    const_shape, create_plugin,
};

/// `test_rust::Tile@1`: output 0 tiles the last axis `times` times and adds `bias`; output 1
/// is `2x`. It stages each row through its workspace.
struct TileCreator;

fn tile_key() -> PluginKey {
    PluginKey::new("test_rust", "Tile", "1")
}

impl PluginCreator for TileCreator {
    fn key(&self) -> PluginKey {
        tile_key()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::with_default("times", 2i32, "copies of the last axis").scalar(),
            FieldSpec::optional("bias", FieldType::F64, "added to output 0").len_range(0, Some(1)),
            FieldSpec::with_default("note", "none", "free text"),
        ]
    }

    fn create(&self, _layer: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let times = fields.i32("times").unwrap_or(2);
        if times < 1 {
            return Err(PluginError::invalid_field(
                &tile_key(),
                "times",
                "must be at least 1",
            ));
        }
        Ok(Box::new(Tile {
            times: times as usize,
            bias: fields.f64("bias").unwrap_or(0.0) as f32,
            fields: fields.clone(),
        }))
    }
}

#[derive(Clone)]
struct Tile {
    times: usize,
    bias: f32,
    fields: FieldCollection,
}

impl Plugin for Tile {
    fn num_outputs(&self) -> usize {
        2
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        match inputs {
            [DType::F32] => Ok(vec![DType::F32; 2]),
            _ => Err(PluginError::Unsupported(format!(
                "Tile: f32 only, got {inputs:?}"
            ))),
        }
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        let [shape] = inputs else {
            return Err(PluginError::InvalidInput("Tile: one input".into()));
        };
        let (last, outer) = shape
            .split_last()
            .ok_or_else(|| PluginError::InvalidInput("Tile: rank 0".into()))?;
        let mut tiled = outer.to_vec();
        tiled.push(last * self.times as i64);
        Ok(vec![tiled, shape.clone()])
    }

    fn supports(&self, pos: usize, io: &[PortDesc], _n: usize, device: DeviceKind) -> bool {
        device == DeviceKind::Cpu && io[pos] == PortDesc::linear(DType::F32)
    }

    fn workspace_size(&self, inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> usize {
        inputs[0].shape.last().map_or(0, |&d| d as usize * 4)
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(cpu) = launch else {
            return Err(PluginError::Unsupported("Tile: CPU only".into()));
        };
        let x = cpu.inputs[0].typed::<f32>()?;
        let inner = *cpu.inputs[0].desc.shape.last().unwrap_or(&1) as usize;
        let stage: &mut [f32] = bytemuck::cast_slice_mut(&mut cpu.workspace[..inner * 4]);
        let (tiled, doubled) = cpu.outputs.split_at_mut(1);
        let (tiled, doubled) = (tiled[0].typed_mut::<f32>()?, doubled[0].typed_mut::<f32>()?);
        for (r, row) in x.chunks(inner).enumerate() {
            stage.copy_from_slice(row);
            for t in 0..self.times {
                let at = (r * self.times + t) * inner;
                for (o, v) in tiled[at..at + inner].iter_mut().zip(stage.iter()) {
                    *o = v + self.bias;
                }
            }
        }
        for (o, v) in doubled.iter_mut().zip(x) {
            *o = 2.0 * v;
        }
        Ok(())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        self.fields.clone()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

/// `test_rust::Panicky@1`: panics where its field `panic_in` says.
struct PanickyCreator;

impl PluginCreator for PanickyCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test_rust", "Panicky", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::required(
            "panic_in",
            FieldType::Char,
            "where to panic",
        )]
    }

    fn create(&self, _layer: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        let at = fields.string("panic_in").unwrap_or_default().to_string();
        assert!(at != "create", "Panicky panicked in create");
        Ok(Box::new(Panicky { at }))
    }
}

#[derive(Clone)]
struct Panicky {
    at: String,
}

impl Panicky {
    fn maybe_panic(&self, here: &str) {
        assert!(self.at != here, "Panicky panicked in {here}");
    }
}

impl Plugin for Panicky {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(inputs.to_vec())
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        self.maybe_panic("output_shapes");
        Ok(inputs.to_vec())
    }

    fn supports(&self, _pos: usize, _io: &[PortDesc], _n: usize, _d: DeviceKind) -> bool {
        self.maybe_panic("supports");
        true
    }

    fn configure(&mut self, _inputs: &[TensorDesc], _outputs: &[TensorDesc]) -> PluginResult<()> {
        self.maybe_panic("configure");
        Ok(())
    }

    fn enqueue(&self, _launch: Launch<'_, '_>) -> PluginResult<()> {
        self.maybe_panic("enqueue");
        Ok(())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new().with("panic_in", self.at.as_str())
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        self.maybe_panic("clone");
        Box::new(self.clone())
    }
}

fn test_creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![Arc::new(TileCreator), Arc::new(PanickyCreator)]
}

torchtrt_plugin_api::export_plugins!(provider = "roundtrip_test 0.0.1", creators = test_creators);

fn extension() -> &'static Extension {
    // SAFETY: the entry point `export_plugins!` generated in this binary keeps the contract.
    unsafe { common::in_process(torchtrt_extension_v1) }
}

fn creator(name: &str) -> Arc<dyn PluginCreator> {
    let found = extension()
        .creators()
        .into_iter()
        .find(|c| c.key().name == name);
    found.expect("exported creator")
}

#[test]
fn keys_and_schemas_survive_the_round_trip() {
    let ext = extension();
    assert_eq!(ext.provider(), "roundtrip_test 0.0.1");
    assert_eq!(ext.path().to_str(), Some("in-process"));
    let back: Vec<(PluginKey, Vec<FieldSpec>)> = ext
        .creators()
        .iter()
        .map(|c| (c.key(), c.field_schema()))
        .collect();
    let orig: Vec<(PluginKey, Vec<FieldSpec>)> = test_creators()
        .iter()
        .map(|c| (c.key(), c.field_schema()))
        .collect();
    assert_eq!(back, orig);
}

#[test]
fn queries_survive_the_round_trip() {
    let fields = FieldCollection::new().with("times", 3i32);
    let p = create_plugin(creator("Tile").as_ref(), "t", &fields).expect("valid");
    assert_eq!(p.num_outputs(), 2);
    assert_eq!(p.output_dtypes(&[DType::F32]), Ok(vec![DType::F32; 2]));
    let err = p.output_dtypes(&[DType::F16]).err();
    assert_eq!(
        err,
        Some(PluginError::Unsupported(
            "plugin test_rust::Tile@1 layer `t`: Tile: f32 only, got [F16]".into()
        ))
    );
    let (b, n) = (DimExpr::sym("b"), DimExpr::sym("n"));
    let shapes = p.output_shapes(&[vec![b.clone(), n.clone().max(4)]]);
    assert_eq!(
        shapes,
        Ok(vec![
            vec![b.clone(), n.clone().max(4) * 3],
            vec![b, n.max(4)]
        ])
    );
    assert_eq!(
        p.output_shapes(&[const_shape(&[2, 5])]),
        Ok(vec![const_shape(&[2, 15]), const_shape(&[2, 5])])
    );
    let io = [PortDesc::linear(DType::F32); 3];
    assert!(p.supports(2, &io, 1, DeviceKind::Cpu));
    assert!(!p.supports(2, &io, 1, DeviceKind::Cuda));
    let descs = [TensorDesc::new(DType::F32, vec![2, 7])];
    assert_eq!(p.workspace_size(&descs, &[]), 28);
    let with_defaults = FieldCollection::new()
        .with("times", 3i32)
        .with("note", "none");
    assert_eq!(p.fields_to_serialize(), with_defaults);
}

#[test]
fn field_errors_keep_their_message() {
    let fields = FieldCollection::new().with("times", 0i32);
    let err = create_plugin(creator("Tile").as_ref(), "t", &fields)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("plugin test_rust::Tile@1: field `times`: must be at least 1")
    );
}

#[test]
fn panics_become_errors() {
    let c = creator("Panicky");
    let make = |at: &str| {
        create_plugin(
            c.as_ref(),
            "p",
            &FieldCollection::new().with("panic_in", at),
        )
    };
    let Err(PluginError::Panic(msg)) = make("create") else {
        panic!("create panics");
    };
    assert!(msg.contains("Panicky panicked in create"), "{msg}");
    let p = make("enqueue").expect("created");
    let desc = TensorDesc::new(DType::F32, vec![1]);
    let err = run_cpu(
        p.as_ref(),
        &[(desc.clone(), Buffer::from_values(&[1.0f32]))],
        &[desc],
    )
    .err();
    assert!(
        matches!(err, Some(PluginError::Panic(m)) if m.contains("Panicky panicked in enqueue"))
    );
    let p = make("output_shapes").expect("created");
    assert!(matches!(
        p.output_shapes(&[const_shape(&[1])]),
        Err(PluginError::Panic(_))
    ));
    let p = make("supports").expect("created");
    assert!(!p.supports(0, &[PortDesc::linear(DType::F32)], 1, DeviceKind::Cpu));
    let p = make("clone").expect("created");
    let copy = p.clone_plugin();
    assert!(matches!(
        copy.output_dtypes(&[DType::F32]),
        Err(PluginError::Panic(_))
    ));
    let mut p = make("configure").expect("created");
    assert!(matches!(p.configure(&[], &[]), Err(PluginError::Panic(_))));
    let after = p
        .output_dtypes(&[DType::F32])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(after.contains("unusable after a panic"), "{after}");
}

#[test]
fn raw_create_refuses_null_arguments() {
    // SAFETY: the entry point generated in this binary; its tables live for the process.
    let ext: &TtrtExtension = unsafe { &*torchtrt_extension_v1() };
    // SAFETY: `nb_creators` valid creator pointers.
    let tile = unsafe { &**ext.creators };
    let create = tile.create.expect("create is set");
    let mut bytes = [0u8; 128];
    let mut err = TtrtErrorBuf {
        data: bytes.as_mut_ptr().cast(),
        capacity: bytes.len(),
    };
    let mut out: *mut TtrtPlugin = std::ptr::null_mut();
    // SAFETY: NULL layer name and fields are what is being tested; the rest is valid.
    let status = unsafe {
        create(
            tile.self_,
            std::ptr::null(),
            std::ptr::null(),
            0,
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, TTRT_ERROR_INVALID_ARGUMENT);
    assert!(out.is_null());
    let msg = std::ffi::CStr::from_bytes_until_nul(&bytes).expect("NUL-terminated");
    assert_eq!(
        msg.to_str(),
        Ok("plugin test_rust::Tile@1: layer name is NULL")
    );
}

fn tile_reference(x: &[f32], inner: usize, times: usize, bias: f32) -> Vec<f32> {
    x.chunks(inner)
        .flat_map(|row| (0..times).flat_map(move |_| row.iter().map(move |v| v + bias)))
        .collect()
}

fn case() -> impl Strategy<Value = (Vec<i64>, Vec<f32>, i32, f64)> {
    (prop::collection::vec(1i64..5, 1..4), 1i32..4, -3.0f64..3.0).prop_flat_map(
        |(shape, times, bias)| {
            let n = shape.iter().product::<i64>() as usize;
            (
                Just(shape),
                prop::collection::vec(-10.0f32..10.0, n),
                Just(times),
                Just(bias),
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn enqueue_through_the_abi_matches_the_reference((shape, x, times, bias) in case()) {
        let fields = FieldCollection::new().with("times", times).with("bias", bias);
        let p = create_plugin(creator("Tile").as_ref(), "t", &fields).expect("valid");
        let outs: Vec<TensorDesc> = p.output_shapes(&[const_shape(&shape)]).expect("shapes").iter()
            .map(|s| TensorDesc::new(DType::F32, s.iter().map(|d| d.as_const().expect("constant")).collect::<Vec<_>>()))
            .collect();
        let input = (TensorDesc::new(DType::F32, shape.clone()), Buffer::from_values(&x));
        let got = run_cpu(p.clone_plugin().as_ref(), &[input], &outs).expect("enqueue");
        let inner = *shape.last().expect("rank >= 1") as usize;
        assert_close(&got[0].values::<f32>(), &tile_reference(&x, inner, times as usize, bias as f32), 1e-5);
        let doubled: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        assert_close(&got[1].values::<f32>(), &doubled, 1e-5);
    }
}
