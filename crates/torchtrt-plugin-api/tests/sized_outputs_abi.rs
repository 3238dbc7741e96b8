//! Outputs sized by a count through the C tables (ABI version 3): a Rust plugin exported
//! with `export_plugins!` and read back with `Extension::from_entry` keeps its sized outputs,
//! and its CPU launch writes the selection and the count the host reads.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::Arc;

use common::{Buffer, run_cpu};
use torchtrt_plugin_api::abi::Extension;
use torchtrt_plugin_api::{
    Capabilities, DType, DeviceKind, DimExpr, FieldCollection, FieldSpec, Launch, Plugin,
    PluginCreator, PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, SizedOutput,
    TensorDesc, const_shape, create_plugin,
};

/// `test_sized::Positives@1`: the positive elements of a 1-D f32 input, in order (output 0,
/// allocated at the input's length), and how many there are (output 1).
struct PositivesCreator;

impl PluginCreator for PositivesCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test_sized", "Positives", "1")
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }

    fn create(&self, _layer: &str, _fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Positives))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            sized_outputs: true,
            ..Capabilities::default()
        }
    }
}

#[derive(Clone)]
struct Positives;

impl Plugin for Positives {
    fn num_outputs(&self) -> usize {
        2
    }

    fn output_dtypes(&self, _inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![DType::F32, DType::I64])
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(vec![inputs[0].clone(), Vec::new()])
    }

    fn sized_outputs(&self) -> Vec<SizedOutput> {
        vec![SizedOutput {
            output: 0,
            axis: 0,
            count: 1,
        }]
    }

    fn supports(&self, pos: usize, io: &[PortDesc], _nb: usize, device: DeviceKind) -> bool {
        let want = if pos == 2 { DType::I64 } else { DType::F32 };
        device == DeviceKind::Cpu && io[pos].dtype == want
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(c) = launch else {
            return Err(PluginError::Unsupported("CPU only".into()));
        };
        let kept: Vec<f32> = c.inputs[0]
            .typed::<f32>()?
            .iter()
            .copied()
            .filter(|&v| v > 0.0)
            .collect();
        c.outputs[0].typed_mut::<f32>()?[..kept.len()].copy_from_slice(&kept);
        c.outputs[1].typed_mut::<i64>()?[0] = kept.len() as i64;
        Ok(())
    }

    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
    }

    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

fn creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![Arc::new(PositivesCreator)]
}

torchtrt_plugin_api::export_plugins!(provider = "sized_outputs_test 0.0.1", creators = creators);

fn extension() -> &'static Extension {
    // SAFETY: the entry point `export_plugins!` generated in this binary keeps the contract.
    unsafe { common::in_process(torchtrt_extension_v1) }
}

fn positives() -> Box<dyn Plugin> {
    let creator = extension()
        .creators()
        .into_iter()
        .next()
        .expect("one creator");
    create_plugin(creator.as_ref(), "positives", &FieldCollection::new()).expect("creates")
}

#[test]
fn the_creators_capabilities_cross_the_abi() {
    let creator = extension()
        .creators()
        .into_iter()
        .next()
        .expect("one creator");
    assert_eq!(
        creator.capabilities(),
        Capabilities {
            sized_outputs: true,
            ..Capabilities::default()
        }
    );
}

#[test]
fn sized_outputs_cross_the_abi() {
    let p = positives();
    assert_eq!(
        p.sized_outputs(),
        vec![SizedOutput {
            output: 0,
            axis: 0,
            count: 1
        }]
    );
    assert_eq!(
        p.output_shapes(&[const_shape(&[6])]),
        Ok(vec![vec![DimExpr::Const(6)], Vec::new()])
    );
}

#[test]
fn a_cpu_launch_writes_the_selection_and_its_count() {
    let p = positives();
    let x = [0.5f32, -1.25, 2.0, -7.5, 3.0, 0.0];
    let out = run_cpu(
        p.as_ref(),
        &[(
            TensorDesc::new(DType::F32, vec![6]),
            Buffer::from_values(&x),
        )],
        &[
            TensorDesc::new(DType::F32, vec![6]),
            TensorDesc::new(DType::I64, vec![]),
        ],
    )
    .expect("runs");
    assert_eq!(out[1].values::<i64>(), vec![3]);
    assert_eq!(out[0].values::<f32>()[..3], [0.5, 2.0, 3.0]);
}
