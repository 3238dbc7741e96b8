//! Shape inputs through the C tables (ABI version 3): a Rust plugin exported with
//! `export_plugins!` and read back with `Extension::from_entry` keeps its shape inputs, sizes
//! its output from their values (or leaves it unknown until they are known), and receives
//! them on the CPU as an ordinary input.

#![allow(
    clippy::result_large_err,
    reason = "PluginError is the crate's error type"
)]

mod common;

use std::sync::Arc;

use common::{Buffer, run_cpu};
use torchtrt_plugin_api::{
    DType, DeviceKind, DimExpr, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator,
    PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr, ShapeValues, const_shape,
    create_plugin,
};

/// `test_shape::Head@1`: the first `k` elements of a 1-D f32 input, `k` read from input 1,
/// an i64 shape input of one element.
struct HeadCreator;

fn key() -> PluginKey {
    PluginKey::new("test_shape", "Head", "1")
}

impl PluginCreator for HeadCreator {
    fn key(&self) -> PluginKey {
        key()
    }

    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }

    fn create(&self, _layer: &str, _fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(Head))
    }
}

#[derive(Clone)]
struct Head;

fn k_of(values: &ShapeValues, n: Option<i64>) -> PluginResult<Option<i64>> {
    let Some(v) = values.ints() else {
        return Ok(None);
    };
    match (v, n) {
        ([k], Some(n)) if !(0..=n).contains(k) => Err(PluginError::InvalidInput(format!(
            "k = {k} is not in 0..={n}"
        ))),
        ([k], _) => Ok(Some(*k)),
        _ => Err(PluginError::InvalidInput(format!(
            "k must have one element, got {v:?}"
        ))),
    }
}

impl Plugin for Head {
    fn num_outputs(&self) -> usize {
        1
    }

    fn output_dtypes(&self, _inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![DType::F32])
    }

    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        self.output_shapes_of(inputs, &[])
    }

    fn shape_inputs(&self) -> Vec<usize> {
        vec![1]
    }

    fn output_shapes_of(
        &self,
        inputs: &[ShapeExpr],
        values: &[ShapeValues],
    ) -> PluginResult<Vec<ShapeExpr>> {
        let n = inputs
            .first()
            .and_then(|s| s.first())
            .and_then(DimExpr::as_const);
        let k = k_of(values.get(1).unwrap_or(&ShapeValues::Unknown), n)?;
        Ok(vec![vec![k.map_or_else(DimExpr::unknown, DimExpr::Const)]])
    }

    fn supports(&self, pos: usize, io: &[PortDesc], _nb: usize, device: DeviceKind) -> bool {
        let want = if pos == 1 { DType::I64 } else { DType::F32 };
        device == DeviceKind::Cpu && io[pos].dtype == want
    }

    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(c) = launch else {
            return Err(PluginError::Unsupported("CPU only".into()));
        };
        let values = ShapeValues::from_bytes(c.inputs[1].desc.dtype, c.inputs[1].data)?;
        let x = c.inputs[0].typed::<f32>()?;
        let k = k_of(&values, Some(x.len() as i64))?.unwrap_or_default() as usize;
        c.outputs[0].typed_mut::<f32>()?.copy_from_slice(&x[..k]);
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
    vec![Arc::new(HeadCreator)]
}

torchtrt_plugin_api::export_plugins!(provider = "shape_inputs_test 0.0.1", creators = creators);

fn head() -> Box<dyn Plugin> {
    // SAFETY: the entry point `export_plugins!` generated in this binary keeps the contract.
    let ext = unsafe { common::in_process(torchtrt_extension_v1) };
    let creator = ext.creators().into_iter().next().expect("one creator");
    create_plugin(creator.as_ref(), "head", &FieldCollection::new()).expect("creates")
}

#[test]
fn shape_inputs_and_their_values_cross_the_abi() {
    let p = head();
    assert_eq!(p.shape_inputs(), vec![1]);
    let shapes = [const_shape(&[5]), const_shape(&[1])];
    let unknown = [ShapeValues::Unknown, ShapeValues::Unknown];
    assert_eq!(
        p.output_shapes_of(&shapes, &unknown),
        Ok(vec![vec![DimExpr::unknown()]])
    );
    let known = [ShapeValues::Unknown, ShapeValues::Ints(vec![3])];
    assert_eq!(
        p.output_shapes_of(&shapes, &known),
        Ok(vec![const_shape(&[3])])
    );
    let too_many = [ShapeValues::Unknown, ShapeValues::Ints(vec![9])];
    let e = p
        .output_shapes_of(&shapes, &too_many)
        .unwrap_err()
        .to_string();
    assert!(e.contains("k = 9 is not in 0..=5"), "{e}");
}

#[test]
fn a_cpu_launch_reads_the_shape_input() {
    let p = head();
    let x = [0.5f32, -1.25, 2.0, 7.5, 3.0];
    let inputs = [
        (
            torchtrt_plugin_api::TensorDesc::new(DType::F32, vec![5]),
            Buffer::from_values(&x),
        ),
        (
            torchtrt_plugin_api::TensorDesc::new(DType::I64, vec![1]),
            Buffer::from_values(&[2i64]),
        ),
    ];
    let out = run_cpu(
        p.as_ref(),
        &inputs,
        &[torchtrt_plugin_api::TensorDesc::new(DType::F32, vec![2])],
    )
    .expect("runs");
    assert_eq!(out[0].values::<f32>(), vec![0.5, -1.25]);
}
