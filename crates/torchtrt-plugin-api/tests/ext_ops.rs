//! A converter and a custom op written in C against `torchtrt_plugin.h`, loaded with
//! `Extension::load`: the converter drives a recording network builder, and the plugin
//! derived from the custom op runs against a plain reference.

mod common;

use std::sync::Arc;

use common::{Buffer, assert_close, run_cpu, shared_library};
use torchtrt_plugin_api::abi::Extension;
use torchtrt_plugin_api::{
    BinaryOp, ConverterNode, DType, DimExpr, FieldCollection, NetworkBuilder, PluginError,
    PluginKey, PluginResult, TensorDesc, TensorHandle, UnaryOp, create_plugin,
};

/// A network builder that records what a converter adds.
#[derive(Default)]
struct Recorder {
    tensors: Vec<(TensorDesc, Option<Vec<u8>>)>,
    binaries: Vec<(BinaryOp, TensorHandle, TensorHandle)>,
    outputs: Vec<(usize, TensorHandle)>,
}

impl Recorder {
    fn push(&mut self, desc: TensorDesc, value: Option<Vec<u8>>) -> TensorHandle {
        self.tensors.push((desc, value));
        TensorHandle(self.tensors.len() as i64 - 1)
    }

    fn get(&self, t: TensorHandle) -> PluginResult<&(TensorDesc, Option<Vec<u8>>)> {
        usize::try_from(t.0)
            .ok()
            .and_then(|i| self.tensors.get(i))
            .ok_or_else(|| PluginError::InvalidInput(format!("no tensor {}", t.0)))
    }
}

fn unused<T>() -> PluginResult<T> {
    Err(PluginError::Unsupported("not used by this test".into()))
}

impl NetworkBuilder for Recorder {
    fn tensor_desc(&self, t: TensorHandle) -> PluginResult<TensorDesc> {
        Ok(self.get(t)?.0.clone())
    }
    fn tensor_value(&self, t: TensorHandle) -> Option<&[u8]> {
        self.get(t).ok()?.1.as_deref()
    }
    fn add_constant(&mut self, desc: &TensorDesc, data: &[u8]) -> PluginResult<TensorHandle> {
        Ok(self.push(desc.clone(), Some(data.to_vec())))
    }
    fn add_binary(
        &mut self,
        op: BinaryOp,
        a: TensorHandle,
        b: TensorHandle,
    ) -> PluginResult<TensorHandle> {
        let desc = self.get(a)?.0.clone();
        self.get(b)?;
        self.binaries.push((op, a, b));
        Ok(self.push(desc, None))
    }
    fn add_unary(&mut self, _: UnaryOp, _: TensorHandle) -> PluginResult<TensorHandle> {
        unused()
    }
    fn add_matmul(
        &mut self,
        _: TensorHandle,
        _: TensorHandle,
        _: bool,
        _: bool,
    ) -> PluginResult<TensorHandle> {
        unused()
    }
    fn add_reshape(&mut self, _: TensorHandle, _: &[i64]) -> PluginResult<TensorHandle> {
        unused()
    }
    fn add_transpose(&mut self, _: TensorHandle, _: &[usize]) -> PluginResult<TensorHandle> {
        unused()
    }
    fn add_concat(&mut self, _: &[TensorHandle], _: i64) -> PluginResult<TensorHandle> {
        unused()
    }
    fn add_cast(&mut self, _: TensorHandle, _: DType) -> PluginResult<TensorHandle> {
        unused()
    }
    fn add_plugin(
        &mut self,
        _: &PluginKey,
        _: &FieldCollection,
        _: &[TensorHandle],
    ) -> PluginResult<Vec<TensorHandle>> {
        unused()
    }
    fn set_output(&mut self, index: usize, t: TensorHandle) -> PluginResult<()> {
        self.get(t)?;
        self.outputs.push((index, t));
        Ok(())
    }
}

fn extension() -> Extension {
    Extension::load(shared_library("ext_ops", &[])).expect("the C extension loads")
}

fn node(attributes: FieldCollection) -> ConverterNode {
    ConverterNode {
        name: "add0".into(),
        op_type: "AddScalar".into(),
        domain: "test_c".into(),
        opset: 1,
        attributes,
        inputs: vec![Some(TensorHandle(0))],
        num_outputs: 1,
    }
}

#[test]
fn a_c_converter_builds_layers_through_the_host() {
    let ext = extension();
    let converters = ext.converters();
    assert_eq!(converters.len(), 1);
    let op = converters[0].op();
    assert_eq!(
        (
            op.domain.as_str(),
            op.op_type.as_str(),
            op.since_opset,
            op.until_opset
        ),
        ("test_c", "AddScalar", 1, None)
    );
    let mut net = Recorder::default();
    let x = net.push(TensorDesc::new(DType::F32, vec![-1, 4]), None);
    let outs = converters[0]
        .convert(
            &node(FieldCollection::new().with("value", 2.5f32)),
            &mut net,
        )
        .unwrap();
    assert_eq!(net.tensors[1].1.as_deref(), Some(&2.5f32.to_le_bytes()[..]));
    assert_eq!(net.binaries, [(BinaryOp::Add, x, TensorHandle(1))]);
    assert_eq!(outs, [TensorHandle(2)]);
}

#[test]
fn a_c_converter_error_comes_back_with_its_message() {
    let ext = extension();
    let mut net = Recorder::default();
    net.push(TensorDesc::new(DType::F32, vec![2]), None);
    let e = ext.converters()[0]
        .convert(&node(FieldCollection::new()), &mut net)
        .unwrap_err();
    assert_eq!(
        e,
        PluginError::InvalidInput("attribute `value` (float) is required".into())
    );
}

#[test]
fn a_c_custom_op_becomes_a_plugin() {
    let ext = extension();
    let creators = ext.custom_op_creators();
    assert_eq!(creators[0].key(), PluginKey::new("test_c", "Square", "1"));
    let creator = Arc::clone(&creators[0]);
    let plugin = create_plugin(
        creator.as_ref(),
        "sq",
        &FieldCollection::new().with("gain", 3.0f32),
    )
    .unwrap();
    let shape = vec![DimExpr::sym("n"), DimExpr::Const(5)];
    assert_eq!(
        plugin.output_shapes(std::slice::from_ref(&shape)).unwrap(),
        [shape]
    );
    assert_eq!(plugin.output_dtypes(&[DType::F32]).unwrap(), [DType::F32]);
    let x: Vec<f32> = (0..15).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
    let desc = TensorDesc::new(DType::F32, vec![3, 5]);
    let out = run_cpu(
        plugin.as_ref(),
        &[(desc.clone(), Buffer::from_values(&x))],
        &[desc],
    )
    .unwrap();
    let want: Vec<f32> = x.iter().map(|v| 3.0 * v * v).collect();
    assert_close(&out[0].values::<f32>(), &want, 1e-6);
    let defaulted = create_plugin(creator.as_ref(), "sq1", &FieldCollection::new()).unwrap();
    assert_eq!(defaulted.fields_to_serialize().f32("gain"), Some(1.0));
}

#[test]
fn malformed_converter_and_custom_op_tables_are_refused_by_name() {
    for (define, needle) in [
        (
            "-DCONVERTER_VERSION=99",
            "converter 0: converter table version 99; this host speaks version 1",
        ),
        (
            "-DNO_CPU_KERNEL",
            "custom op 0: custom op test_c::Square: `cpu_kernel` is NULL",
        ),
        ("-DTWICE", "converter test_c::AddScalar is provided twice"),
    ] {
        let e = Extension::load(shared_library("ext_ops", &[define]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is malformed") && e.contains(needle),
            "{define}: {e}"
        );
    }
}
