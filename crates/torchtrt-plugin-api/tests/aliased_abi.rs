//! Output aliases through the C tables (ABI version 4): a Rust plugin exported with
//! `export_plugins!` and read back with `Extension::from_entry` names the input each output
//! aliases, its creator says so in its capabilities, and a panic while answering reads as
//! "no alias" on the host's side instead of crossing the table.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::Arc;

use torchtrt_plugin_api::{
    Capabilities, DType, DeviceKind, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator,
    PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, create_plugin,
};

/// `test_alias::Update@1`: inputs (cache, values), outputs (cache updated, a copy of values);
/// output 0 aliases input `aliased` (-1: none); asking about output 9 panics.
struct UpdateCreator;

impl PluginCreator for UpdateCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test_alias", "Update", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![FieldSpec::with_default("aliased", 0i32, "the input output 0 aliases").scalar()]
    }
    fn create(&self, _layer: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Update {
            aliased: usize::try_from(fields.i32("aliased").unwrap_or(-1)).ok(),
        }))
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            aliased_outputs: true,
            ..Capabilities::default()
        }
    }
}

#[derive(Clone)]
struct Update {
    aliased: Option<usize>,
}

impl Plugin for Update {
    fn num_outputs(&self) -> usize {
        2
    }
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(inputs.to_vec())
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(inputs.to_vec())
    }
    fn aliased_input(&self, output: usize) -> Option<usize> {
        assert_ne!(output, 9, "asked about output 9");
        (output == 0).then_some(self.aliased).flatten()
    }
    fn supports(&self, _: usize, _: &[PortDesc], _: usize, _: DeviceKind) -> bool {
        true
    }
    fn enqueue(&self, _: Launch<'_, '_>) -> PluginResult<()> {
        Err(PluginError::Unsupported("never launched here".into()))
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        let aliased = self.aliased.map_or(-1, |i| i as i32);
        FieldCollection::new().with("aliased", aliased)
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

fn creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![Arc::new(UpdateCreator)]
}

torchtrt_plugin_api::export_plugins!(provider = "aliased_test 0.0.1", creators = creators);

fn creator() -> Arc<dyn PluginCreator> {
    // SAFETY: the entry point `export_plugins!` generated in this binary keeps the contract.
    let ext = unsafe { common::in_process(torchtrt_extension_v1) };
    ext.creators().into_iter().next().expect("one creator")
}

fn update(aliased: i32) -> Box<dyn Plugin> {
    let fields = FieldCollection::new().with("aliased", aliased);
    create_plugin(creator().as_ref(), "update", &fields).expect("creates")
}

#[test]
fn the_capability_crosses_the_table() {
    assert_eq!(
        creator().capabilities(),
        Capabilities {
            aliased_outputs: true,
            ..Capabilities::default()
        }
    );
}

#[test]
fn each_output_names_the_input_it_aliases() {
    for (aliased, want) in [(0, Some(0)), (1, Some(1)), (-1, None)] {
        let p = update(aliased);
        assert_eq!(p.aliased_input(0), want, "aliased = {aliased}");
        assert_eq!(p.aliased_input(1), None);
        assert_eq!(p.clone_plugin().aliased_input(0), want, "a clone keeps it");
    }
}

#[test]
fn an_index_past_the_inputs_reaches_the_host_for_the_builder_to_refuse() {
    assert_eq!(update(5).aliased_input(0), Some(5));
}

#[test]
fn a_panic_while_answering_is_no_alias() {
    let p = update(0);
    assert_eq!(p.aliased_input(9), None);
    assert_eq!(p.aliased_input(0), Some(0), "the plugin stays usable");
    assert_eq!(p.aliased_input(usize::MAX), None);
}
