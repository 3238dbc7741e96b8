//! Tactics through the C tables (ABI version 3): a Rust plugin exported with
//! `export_plugins!` and read back with `Extension::from_entry` lists its tactics for the
//! descriptions and device it is asked about, accepts the ones it offers, refuses others
//! with its own message, and names that cannot cross the table are refused.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::Arc;

use common::{Buffer, run_cpu};
use torchtrt_plugin_api::{
    Capabilities, DType, DeviceKind, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator,
    PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, Tactic, TensorDesc, create_plugin,
};

/// `test_tactics::Pick@1`: offers `rows` and `columns` on the CPU for inputs of rank 2 and
/// `wide` too when the last dim exceeds 100; `long_name` makes it offer a name too long
/// for the table.
struct PickCreator;

impl PluginCreator for PickCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test_tactics", "Pick", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::with_default("long_name", 0i32, "offer an overlong name").scalar()]
    }
    fn create(&self, _layer: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Pick {
            long_name: fields.i32("long_name").unwrap_or(0) != 0,
            tactic: 0,
        }))
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            tactics: true,
            ..Capabilities::default()
        }
    }
}

#[derive(Clone)]
struct Pick {
    long_name: bool,
    tactic: u32,
}

impl Plugin for Pick {
    fn num_outputs(&self) -> usize {
        1
    }
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(inputs.to_vec())
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(inputs.to_vec())
    }
    fn supports(&self, _: usize, _: &[PortDesc], _: usize, _: DeviceKind) -> bool {
        true
    }
    fn tactics(&self, inputs: &[TensorDesc], _: &[TensorDesc], device: DeviceKind) -> Vec<Tactic> {
        if device != DeviceKind::Cpu || inputs[0].shape.len() != 2 {
            return Vec::new();
        }
        let mut t = vec![Tactic::new(4, "rows"), Tactic::new(9, "columns")];
        if inputs[0].shape[1] > 100 {
            t.push(Tactic::new(12, "wide"));
        }
        if self.long_name {
            t.push(Tactic::new(13, &"x".repeat(64)));
        }
        t
    }
    fn set_tactic(&mut self, tactic: u32) -> PluginResult<()> {
        if ![0, 4, 9, 12].contains(&tactic) {
            return Err(PluginError::InvalidInput(format!(
                "Pick has no tactic {tactic}"
            )));
        }
        self.tactic = tactic;
        Ok(())
    }
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(l) = launch else {
            return Err(PluginError::Unsupported("CPU only".into()));
        };
        let t = self.tactic as f32;
        for v in l.outputs[0].typed_mut::<f32>()? {
            *v = t;
        }
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new().with("long_name", i32::from(self.long_name))
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

fn creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![Arc::new(PickCreator)]
}

torchtrt_plugin_api::export_plugins!(provider = "tactics_test 0.0.1", creators = creators);

fn pick(long_name: bool) -> Box<dyn Plugin> {
    // SAFETY: the entry point `export_plugins!` generated in this binary keeps the contract.
    let ext = unsafe { common::in_process(torchtrt_extension_v1) };
    let creator = ext.creators().into_iter().next().expect("one creator");
    assert!(creator.capabilities().tactics);
    let fields = FieldCollection::new().with("long_name", i32::from(long_name));
    create_plugin(creator.as_ref(), "pick", &fields).expect("creates")
}

fn desc(shape: &[i64]) -> Vec<TensorDesc> {
    vec![TensorDesc::new(DType::F32, shape.to_vec())]
}

#[test]
fn tactics_cross_the_table_with_the_descriptions_and_device() {
    let p = pick(false);
    let names = |t: Vec<Tactic>| t.into_iter().map(|t| (t.id, t.name)).collect::<Vec<_>>();
    assert_eq!(
        names(p.tactics(&desc(&[2, 8]), &desc(&[2, 8]), DeviceKind::Cpu)),
        [(4, "rows".to_string()), (9, "columns".to_string())]
    );
    assert_eq!(
        p.tactics(&desc(&[2, 300]), &desc(&[2, 300]), DeviceKind::Cpu)
            .len(),
        3
    );
    assert!(
        p.tactics(&desc(&[2, 8]), &desc(&[2, 8]), DeviceKind::Cuda)
            .is_empty()
    );
    assert!(
        p.tactics(&desc(&[8]), &desc(&[8]), DeviceKind::Cpu)
            .is_empty()
    );
}

#[test]
fn set_tactic_crosses_the_table_and_reaches_the_launch() {
    let mut p = pick(false);
    p.set_tactic(9).expect("offered");
    let x = TensorDesc::new(DType::F32, vec![3]);
    let out = run_cpu(
        p.as_ref(),
        &[(x.clone(), Buffer::from_values(&[1.0f32, 2.0, 3.0]))],
        &[x],
    )
    .expect("runs");
    assert_eq!(out[0].values::<f32>(), [9.0, 9.0, 9.0]);
    let err = p.set_tactic(5).unwrap_err().to_string();
    assert!(err.contains("Pick has no tactic 5"), "{err}");
}

#[test]
fn a_name_too_long_for_the_table_gives_no_tactics() {
    let p = pick(true);
    assert!(
        p.tactics(&desc(&[2, 8]), &desc(&[2, 8]), DeviceKind::Cpu)
            .is_empty()
    );
}
