//! A plugin with several outputs of their own dtypes: each row's maximum (f32), the index of
//! its first maximum (i64) and whether that maximum is positive (bool), all marked as
//! engine outputs, checked against a plain reference before and after serialisation, at
//! two batch sizes of one dynamic engine.

mod common;

use std::sync::Arc;

use torchtrt::plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator, PluginError,
    PluginKey, PluginResult, PortDesc, Registrar, ShapeExpr, TensorFormat,
};
use torchtrt::{BuildConfig, Dim, NetworkDefinition, Tensor};

/// Rows of `[N, C]` f32 → maximum, first argmax, maximum > 0.
#[derive(Clone)]
struct RowMax;

const OUTPUT_DTYPES: [DType; 3] = [DType::F32, DType::I64, DType::Bool];

impl Plugin for RowMax {
    fn num_outputs(&self) -> usize {
        3
    }
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        match inputs {
            [DType::F32] => Ok(OUTPUT_DTYPES.to_vec()),
            _ => Err(PluginError::Unsupported(format!(
                "RowMax: one f32 input, got {inputs:?}"
            ))),
        }
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        let [shape] = inputs else {
            return Err(PluginError::InvalidInput("RowMax: one input".into()));
        };
        let rows = shape[..shape.len().saturating_sub(1)].to_vec();
        Ok(vec![rows.clone(), rows.clone(), rows])
    }
    fn supports(&self, pos: usize, io: &[PortDesc], _: usize, device: DeviceKind) -> bool {
        let want = if pos == 0 {
            DType::F32
        } else {
            OUTPUT_DTYPES[pos - 1]
        };
        device == DeviceKind::Cpu && io[pos].format == TensorFormat::Linear && io[pos].dtype == want
    }
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(cpu) = launch else {
            return Err(PluginError::Unsupported("RowMax: CPU only".into()));
        };
        let x = cpu.inputs[0].typed::<f32>()?;
        let c = usize::try_from(*cpu.inputs[0].desc.shape.last().unwrap_or(&1))
            .map_err(|e| PluginError::InvalidInput(format!("RowMax: {e}")))?;
        let [max, arg, positive] = cpu.outputs else {
            return Err(PluginError::InvalidInput("RowMax: three outputs".into()));
        };
        let max = max.typed_mut::<f32>()?;
        let arg = arg.typed_mut::<i64>()?;
        let positive = &mut *positive.data;
        for (r, row) in x.chunks_exact(c).enumerate() {
            let (i, m) = first_max(row);
            max[r] = m;
            arg[r] = i as i64;
            positive[r] = u8::from(m > 0.0);
        }
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

/// The index and value of the first maximum of `row`.
fn first_max(row: &[f32]) -> (usize, f32) {
    row.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
            if v > bv { (i, v) } else { (bi, bv) }
        })
}

struct RowMaxCreator;

impl PluginCreator for RowMaxCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("tests", "RowMax", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(RowMax))
    }
}

/// Runs `engine` on random `[n, 7]` rows (in [−1.75, 0.25), so that both signs of the
/// maximum occur) and checks the three outputs against the
/// reference, by dtype.
fn check(engine: &torchtrt::Engine, n: usize, seed: u64) {
    let values: Vec<f32> = common::random_f32(n * 7, seed)
        .into_iter()
        .map(|v| v - 0.75)
        .collect();
    let x = Tensor::from_vec(&[n, 7], values.clone()).expect("x");
    let mut ctx = engine.create_context().expect("context");
    let got = ctx.execute(&[&x]).expect("runs");
    assert_eq!(got.len(), 3);
    let dtypes: Vec<DType> = got.iter().map(Tensor::dtype).collect();
    assert_eq!(dtypes, OUTPUT_DTYPES);
    let want: Vec<(usize, f32)> = values.chunks_exact(7).map(first_max).collect();
    if n >= 8 {
        assert!(want.iter().any(|w| w.1 > 0.0) && want.iter().any(|w| w.1 <= 0.0));
    }
    assert_eq!(
        got[0].as_slice::<f32>().expect("f32"),
        want.iter().map(|w| w.1).collect::<Vec<_>>()
    );
    assert_eq!(
        got[1].as_slice::<i64>().expect("i64"),
        want.iter().map(|w| w.0 as i64).collect::<Vec<_>>()
    );
    let positive: Vec<u8> = want.iter().map(|w| u8::from(w.1 > 0.0)).collect();
    assert_eq!(got[2].as_slice::<u8>().expect("bool bytes"), positive);
    for t in &got {
        assert_eq!(t.shape(), [n]);
    }
}

#[test]
fn outputs_of_three_dtypes_survive_build_serialisation_and_dynamic_shapes() {
    let registry = torchtrt::registry();
    registry
        .register_creator(Arc::new(RowMaxCreator), "tests")
        .ok();
    let mut net = NetworkDefinition::new();
    let batch = Dim::Dynamic {
        name: "N".into(),
        min: 1,
        opt: 8,
        max: 64,
    };
    let x = net
        .add_input("x", DType::F32, &[batch, 7.into()])
        .expect("x");
    let outs = net
        .add_plugin(
            "row_max",
            registry,
            &RowMaxCreator.key(),
            &FieldCollection::new(),
            &[x],
        )
        .expect("plugin");
    for (out, name) in outs.iter().zip(["max", "argmax", "positive"]) {
        net.mark_output(*out, name).expect("output");
    }
    let engine = torchtrt::compile(&net, &BuildConfig::default()).expect("compiles");
    let names: Vec<(String, DType)> = engine
        .outputs()
        .into_iter()
        .map(|o| (o.name, o.dtype))
        .collect();
    assert_eq!(
        names,
        [
            ("max".to_string(), DType::F32),
            ("argmax".to_string(), DType::I64),
            ("positive".to_string(), DType::Bool),
        ]
    );
    check(&engine, 8, 1);
    check(&engine, 37, 2);
    let reloaded = torchtrt::Runtime::new()
        .expect("runtime")
        .deserialize(&engine.serialize())
        .expect("deserializes");
    check(&reloaded, 64, 3);
    check(&reloaded, 1, 4);
}

/// `RowMax` claiming that its `[N]` maximum aliases its `[N, 7]` input.
#[derive(Clone)]
struct BadAlias;

impl Plugin for BadAlias {
    fn num_outputs(&self) -> usize {
        1
    }
    fn output_dtypes(&self, _: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![DType::F32])
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        Ok(vec![inputs[0][..1].to_vec()])
    }
    fn aliased_input(&self, _: usize) -> Option<usize> {
        Some(0)
    }
    fn supports(&self, pos: usize, io: &[PortDesc], _: usize, _: DeviceKind) -> bool {
        io[pos].dtype == DType::F32
    }
    fn enqueue(&self, _: Launch<'_, '_>) -> PluginResult<()> {
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

struct BadAliasCreator;

impl PluginCreator for BadAliasCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("tests", "BadAlias", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }
    fn create(&self, _: &str, _: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(BadAlias))
    }
}

#[test]
fn an_output_aliasing_an_input_of_another_shape_is_a_build_error() {
    let registry = torchtrt::PluginRegistry::new();
    registry
        .register_creator(Arc::new(BadAliasCreator), "tests")
        .expect("registers");
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::Fixed(3), Dim::Fixed(7)])
        .expect("x");
    let y = net
        .add_plugin(
            "bad",
            &registry,
            &BadAliasCreator.key(),
            &FieldCollection::new(),
            &[x],
        )
        .expect("layer")[0];
    net.mark_output(y, "y").expect("y");
    let e = torchtrt::compile(&net, &BuildConfig::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("output 0 aliases input 0 but is f32[3] where the input is f32[3,7]"),
        "{e}"
    );
}
