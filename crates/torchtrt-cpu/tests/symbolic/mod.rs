//! Running kernels the way an engine does: prepared once for symbolic shapes (and build-time
//! values where known), then executed on concrete inputs whose output shapes come from the
//! shape rule with every value present; and one-layer engines built, serialized, reloaded
//! and run end to end.

use std::sync::Arc;

use torchtrt_core::plugin_api::{DType, DimExpr, ShapeExpr, const_shape, shape_values};
use torchtrt_core::tensor::shape_i64;
use torchtrt_core::{
    Backend, BuildConfig, Dim, EngineLoader, InferInput, LayerKind, NetworkDefinition, Tensor,
    build,
};
use torchtrt_cpu::CpuBackend;

/// A shape from dims that are numbers or symbol names: `sym(&["n", "3"])`.
pub fn sym(dims: &[&str]) -> ShapeExpr {
    dims.iter()
        .map(|d| {
            d.parse::<i64>()
                .map_or_else(|_| DimExpr::sym(d), DimExpr::Const)
        })
        .collect()
}

/// One input as the builder sees it: dtype, symbolic shape, value when known at build time.
pub struct BuildInput {
    /// Element type.
    pub dtype: DType,
    /// Shape, possibly symbolic.
    pub shape: ShapeExpr,
    /// The value, for build-time constants.
    pub value: Option<Tensor>,
}

impl BuildInput {
    /// An input known only by dtype and shape.
    pub fn new(dtype: DType, dims: &[&str]) -> BuildInput {
        BuildInput {
            dtype,
            shape: sym(dims),
            value: None,
        }
    }

    /// A constant input.
    pub fn constant(value: Tensor) -> BuildInput {
        BuildInput {
            dtype: value.dtype(),
            shape: const_shape(&shape_i64(value.shape())),
            value: Some(value),
        }
    }
}

/// Output dtypes and shapes of `layer` for `symbolic` inputs.
pub fn infer(
    layer: &LayerKind,
    symbolic: &[BuildInput],
) -> Result<Vec<(DType, ShapeExpr)>, String> {
    let infer: Vec<InferInput<'_>> = symbolic
        .iter()
        .map(|b| InferInput {
            dtype: b.dtype,
            shape: &b.shape,
            value: b.value.as_ref(),
        })
        .collect();
    Ok(layer
        .op()
        .infer(&infer)?
        .into_iter()
        .map(|t| (t.dtype, t.shape))
        .collect())
}

/// Prepares `layer` once for `symbolic` inputs on `backend`, then runs it on each set of
/// concrete inputs; outputs are pre-filled with garbage so unwritten elements show.
pub fn run_prepared(
    backend: &dyn Backend,
    layer: &LayerKind,
    symbolic: &[BuildInput],
    runs: &[Vec<&Tensor>],
) -> Result<Vec<Vec<Tensor>>, String> {
    let infer: Vec<InferInput<'_>> = symbolic
        .iter()
        .map(|b| InferInput {
            dtype: b.dtype,
            shape: &b.shape,
            value: b.value.as_ref(),
        })
        .collect();
    let kernel = backend.prepare(layer, &infer)?;
    runs.iter()
        .map(|inputs| {
            let shapes: Vec<ShapeExpr> = inputs
                .iter()
                .map(|t| const_shape(&shape_i64(t.shape())))
                .collect();
            let concrete: Vec<InferInput<'_>> = inputs
                .iter()
                .zip(&shapes)
                .map(|(t, shape)| InferInput {
                    dtype: t.dtype(),
                    shape,
                    value: Some(t),
                })
                .collect();
            let mut outs = layer
                .op()
                .infer(&concrete)?
                .iter()
                .map(|ts| {
                    let dims =
                        shape_values(&ts.shape).ok_or("a symbolic output dim at run time")?;
                    let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
                    Ok::<_, String>(torchtrt_testing::sentinel_tensor(ts.dtype, &dims))
                })
                .collect::<Result<Vec<_>, _>>()?;
            kernel.execute(inputs, &mut outs)?;
            Ok(outs)
        })
        .collect()
}

/// A network input: name, dtype and dims (`Dim::Fixed` or `Dim::dynamic`).
pub type NetInput<'a> = (&'a str, DType, Vec<Dim>);

/// Builds a CPU engine of the one layer `layer` over network inputs `inputs` (outputs
/// `y0`, `y1`, …), serializes it, loads it back and runs it on each set of tensors.
pub fn run_engine(
    layer: LayerKind,
    inputs: &[NetInput<'_>],
    runs: &[Vec<&Tensor>],
) -> Result<Vec<Vec<Tensor>>, String> {
    let mut net = NetworkDefinition::new();
    let ids = inputs
        .iter()
        .map(|(name, dtype, dims)| net.add_input(name, *dtype, dims))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let outs = net
        .add_layer("layer", layer, &ids)
        .map_err(|e| e.to_string())?;
    for (i, t) in outs.iter().enumerate() {
        net.mark_output(*t, &format!("y{i}"))
            .map_err(|e| e.to_string())?;
    }
    let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let built = build(&net, &BuildConfig::default(), std::slice::from_ref(&cpu))
        .map_err(|e| e.to_string())?;
    let engine = EngineLoader::new(vec![cpu])
        .deserialize(&built.serialize())
        .map_err(|e| e.to_string())?;
    let mut context = engine.create_context().unwrap();
    runs.iter()
        .map(|r| context.execute(r).map_err(|e| e.to_string()))
        .collect()
}
