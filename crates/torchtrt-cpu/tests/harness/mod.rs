//! Helpers for the single-kind test binaries: shape rules on symbolic inputs, a kernel
//! prepared once for symbolic shapes and run on concrete inputs, and small networks
//! compiled for the CPU backend and reloaded from their serialized form.

use std::sync::Arc;

use torchtrt_core::plugin_api::{DType, DimExpr, ShapeExpr, const_shape, shape_values};
use torchtrt_core::tensor::shape_i64;
use torchtrt_core::{
    Backend, BuildConfig, Engine, EngineLoader, InferInput, LayerKind, NetworkDefinition, Tensor,
    TypeShape,
};
use torchtrt_cpu::CpuBackend;

/// A symbolic shape: numbers are constants, anything else a named dim.
pub fn sym(dims: &[&str]) -> ShapeExpr {
    dims.iter()
        .map(|d| {
            d.parse::<i64>()
                .map_or_else(|_| DimExpr::sym(d), DimExpr::Const)
        })
        .collect()
}

/// An input to a shape rule: dtype, shape, and the value when known.
pub type Sym<'a> = (DType, ShapeExpr, Option<&'a Tensor>);

/// The layer's shape rule on these inputs.
pub fn infer(layer: impl Into<LayerKind>, inputs: &[Sym<'_>]) -> Result<Vec<TypeShape>, String> {
    let layer = layer.into();
    let infer: Vec<InferInput<'_>> = inputs
        .iter()
        .map(|(dtype, shape, value)| InferInput {
            dtype: *dtype,
            shape,
            value: *value,
        })
        .collect();
    layer.op().infer(&infer)
}

/// The one output's dtype and shape under the layer's shape rule.
pub fn infer_one(layer: impl Into<LayerKind>, inputs: &[Sym<'_>]) -> Result<TypeShape, String> {
    infer(layer, inputs)?
        .pop()
        .ok_or_else(|| "no output".to_string())
}

/// Prepares `layer` once for `symbolic` inputs (values where given, e.g. constants), then
/// runs it on each set of concrete inputs as the runtime does: output shapes from the shape
/// rule with every value known, outputs pre-filled with the sentinel.
pub fn run_prepared(
    layer: impl Into<LayerKind>,
    symbolic: &[Sym<'_>],
    runs: &[Vec<&Tensor>],
) -> Result<Vec<Tensor>, String> {
    let layer = layer.into();
    let backend = CpuBackend::new();
    let infer: Vec<InferInput<'_>> = symbolic
        .iter()
        .map(|(dtype, shape, value)| InferInput {
            dtype: *dtype,
            shape,
            value: *value,
        })
        .collect();
    let kernel = backend.prepare(&layer, &infer)?;
    runs.iter()
        .map(|inputs| {
            let shapes: Vec<ShapeExpr> = inputs
                .iter()
                .map(|t| const_shape(&shape_i64(t.shape())))
                .collect();
            let concrete: Vec<Sym<'_>> = inputs
                .iter()
                .zip(shapes)
                .map(|(t, s)| (t.dtype(), s, Some(*t)))
                .collect();
            let ts = infer_one(layer.clone(), &concrete)?;
            let dims = shape_values(&ts.shape).ok_or("the shape rule left a symbolic dim")?;
            let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
            let mut out = vec![torchtrt_testing::sentinel_tensor(ts.dtype, &dims)];
            kernel.execute(inputs, &mut out)?;
            Ok(out.remove(0))
        })
        .collect()
}

/// The CPU backend as the builder and runtime take it.
pub fn backends() -> Vec<Arc<dyn Backend>> {
    vec![Arc::new(CpuBackend::new())]
}

/// Builds `net` for the CPU, serializes the engine and loads it back.
pub fn compile(net: &NetworkDefinition) -> Result<Engine, String> {
    let engine = torchtrt_core::build(net, &BuildConfig::default(), &backends())
        .map_err(|e| e.to_string())?;
    EngineLoader::new(backends())
        .deserialize(&engine.serialize())
        .map_err(|e| e.to_string())
}

/// The kinds of an engine's layers, in execution order.
pub fn kinds(engine: &Engine) -> Vec<&'static str> {
    engine
        .plan()
        .layers
        .iter()
        .map(|l| l.kind.op().kind())
        .collect()
}

/// Runs `engine` on `inputs` and returns its outputs.
pub fn execute(engine: &Engine, inputs: &[&Tensor]) -> Result<Vec<Tensor>, String> {
    engine
        .create_context()
        .unwrap()
        .execute(inputs)
        .map_err(|e| e.to_string())
}

/// An i64 1-D tensor.
pub fn ints(values: &[i64]) -> Tensor {
    Tensor::from_slice(&[values.len()], values).expect("one dim")
}
