//! `ExecutionContext`: runs an engine on concrete inputs with its own activation memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use torchtrt_plugin_api::{DType, ShapeDisplay};

use super::pool::BufferPool;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::layers::LayerKind;
use crate::network::Dim;
use crate::tensor::{Tensor, shape_i64};

enum Slot<'a> {
    Empty,
    Borrowed(&'a Tensor),
    Shared(Arc<Tensor>),
    Owned(Tensor),
}

impl Slot<'_> {
    fn get(&self) -> Option<&Tensor> {
        match self {
            Slot::Empty => None,
            Slot::Borrowed(t) => Some(t),
            Slot::Shared(t) => Some(t),
            Slot::Owned(t) => Some(t),
        }
    }
}

/// Time spent in one layer over the runs since profiling was enabled (TensorRT's
/// `IProfiler`).
#[derive(Clone, Debug)]
pub struct LayerTiming {
    /// Layer name.
    pub layer: String,
    /// Layer kind, e.g. `Convolution`.
    pub kind: &'static str,
    /// Runs measured.
    pub calls: u64,
    /// Total time, output allocation and shape inference included.
    pub total: Duration,
}

/// Executes an engine (TensorRT's `IExecutionContext`). Holds the activation buffers it
/// reuses from run to run; create one per thread.
pub struct ExecutionContext {
    engine: Engine,
    pool: BufferPool,
    profile: Option<Vec<LayerTiming>>,
    /// Per layer: whether its outputs follow from constants alone (a foldable layer of
    /// constant inputs the builder left, e.g. one too large to fold into the engine).
    derived: Vec<bool>,
    /// Per layer: its outputs from the first run, when it is `derived`.
    cached: Vec<Option<Vec<Arc<Tensor>>>>,
}

impl ExecutionContext {
    pub(crate) fn new(engine: Engine) -> ExecutionContext {
        let derived = engine.plan().constant_derived();
        ExecutionContext {
            cached: vec![None; derived.len()],
            derived,
            engine,
            pool: BufferPool::default(),
            profile: None,
        }
    }

    /// Starts (or stops and discards) per-layer timing of later runs.
    pub fn set_profiling(&mut self, on: bool) {
        self.profile = on.then(|| {
            self.engine
                .plan()
                .layers
                .iter()
                .map(|l| LayerTiming {
                    layer: l.name.clone(),
                    kind: l.kind.op().kind(),
                    calls: 0,
                    total: Duration::ZERO,
                })
                .collect()
        });
    }

    /// Per-layer timings in execution order, when profiling is on.
    pub fn profile(&self) -> Option<&[LayerTiming]> {
        self.profile.as_deref()
    }

    /// The engine this context runs.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Bytes of activation memory kept for the next run.
    pub fn pooled_bytes(&self) -> usize {
        self.pool.held_bytes()
    }

    /// Runs the engine on inputs given by name; returns the outputs by name, in the engine's
    /// output order.
    pub fn execute_named(&mut self, inputs: &[(&str, &Tensor)]) -> Result<Vec<(String, Tensor)>> {
        let plan = self.engine.plan();
        for (name, _) in inputs {
            if !plan.inputs.iter().any(|i| i.name == *name) {
                let known: Vec<&str> = plan.inputs.iter().map(|i| i.name.as_str()).collect();
                return Err(Error::Input(format!(
                    "the engine has no input `{name}` (inputs: {})",
                    known.join(", ")
                )));
            }
        }
        let ordered = plan
            .inputs
            .iter()
            .map(|i| {
                inputs
                    .iter()
                    .find(|(n, _)| *n == i.name)
                    .map(|(_, t)| *t)
                    .ok_or_else(|| Error::Input(format!("input `{}` is missing", i.name)))
            })
            .collect::<Result<Vec<&Tensor>>>()?;
        let names: Vec<String> = plan.outputs.iter().map(|(n, _)| n.clone()).collect();
        Ok(names.into_iter().zip(self.execute(&ordered)?).collect())
    }

    /// Runs the engine on inputs in the engine's input order; returns outputs in its output
    /// order.
    pub fn execute(&mut self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let engine = self.engine.clone();
        let inner = &engine.inner;
        let plan = &inner.plan;
        check_inputs(plan, inputs)?;
        let mut slots: Vec<Slot<'_>> = (0..plan.tensor_names.len()).map(|_| Slot::Empty).collect();
        for (input, t) in plan.inputs.iter().zip(inputs) {
            slots[input.tensor.index()] = Slot::Borrowed(t);
        }
        let mut body = || -> Result<()> {
            for (li, layer) in plan.layers.iter().enumerate() {
                if let LayerKind::Constant(c) = &layer.kind {
                    slots[layer.outputs[0].index()] = Slot::Shared(c.value.clone());
                    continue;
                }
                if let Some(values) = &self.cached[li] {
                    for (t, v) in layer.outputs.iter().zip(values) {
                        slots[t.index()] = Slot::Shared(v.clone());
                    }
                    continue;
                }
                let kernel = inner.kernels[li].as_ref().ok_or_else(|| Error::Execution {
                    layer: layer.name.clone(),
                    message: "no kernel was prepared".into(),
                })?;
                let ins: Vec<&Tensor> = layer
                    .inputs
                    .iter()
                    .map(|t| {
                        slots[t.index()].get().ok_or_else(|| Error::Execution {
                            layer: layer.name.clone(),
                            message: format!(
                                "input `{}` was released early",
                                plan.tensor_names[t.index()]
                            ),
                        })
                    })
                    .collect::<Result<_>>()?;
                let started = self.profile.is_some().then(Instant::now);
                let dims = self.output_dims(layer, &ins)?;
                let steal = layer.kind.is_view()
                    && plan.memory.release_after[li].contains(&layer.inputs[0])
                    && matches!(slots[layer.inputs[0].index()], Slot::Owned(_))
                    && dims.len() == 1
                    && ins[0].dtype() == dims[0].0
                    && ins[0].numel() == dims[0].1.iter().product::<usize>();
                let outs = if steal {
                    drop(ins);
                    let Slot::Owned(mut t) =
                        std::mem::replace(&mut slots[layer.inputs[0].index()], Slot::Empty)
                    else {
                        unreachable!("checked above")
                    };
                    t.reshape(&dims[0].1)?;
                    vec![t]
                } else {
                    let mut outs: Vec<Tensor> = dims
                        .iter()
                        .map(|(dtype, d)| {
                            let bytes = d.iter().product::<usize>() * dtype.size();
                            Tensor::with_buffer(*dtype, d, self.pool.take(bytes))
                        })
                        .collect();
                    kernel
                        .execute(&ins, &mut outs)
                        .map_err(|message| Error::Execution {
                            layer: layer.name.clone(),
                            message,
                        })?;
                    outs
                };
                if let (Some(t0), Some(p)) = (started, self.profile.as_mut()) {
                    p[li].calls += 1;
                    p[li].total += t0.elapsed();
                }
                if self.derived[li] {
                    let values: Vec<Arc<Tensor>> = outs.into_iter().map(Arc::new).collect();
                    for (t, v) in layer.outputs.iter().zip(&values) {
                        slots[t.index()] = Slot::Shared(v.clone());
                    }
                    self.cached[li] = Some(values);
                } else {
                    for (t, out) in layer.outputs.iter().zip(outs) {
                        slots[t.index()] = Slot::Owned(out);
                    }
                }
                for t in &plan.memory.release_after[li] {
                    if let Slot::Owned(old) = std::mem::replace(&mut slots[t.index()], Slot::Empty)
                    {
                        self.pool.put(old.into_buffer());
                    }
                }
            }
            Ok(())
        };
        let mut run = Ok(());
        inner.backend.run_scope(&mut || run = body());
        let result = run.and_then(|()| {
            let mut outputs = Vec::with_capacity(plan.outputs.len());
            for (i, (name, t)) in plan.outputs.iter().enumerate() {
                let later = plan.outputs[i + 1..].iter().any(|(_, u)| u == t);
                let value = match std::mem::replace(&mut slots[t.index()], Slot::Empty) {
                    Slot::Owned(v) if !later => v,
                    Slot::Owned(v) => {
                        let c = v.clone();
                        slots[t.index()] = Slot::Owned(v);
                        c
                    }
                    Slot::Borrowed(v) => {
                        slots[t.index()] = Slot::Borrowed(v);
                        v.clone()
                    }
                    Slot::Shared(v) => {
                        let c = (*v).clone();
                        slots[t.index()] = Slot::Shared(v);
                        c
                    }
                    Slot::Empty => {
                        return Err(Error::Execution {
                            layer: name.clone(),
                            message: "output was not computed".into(),
                        });
                    }
                };
                outputs.push(value);
            }
            Ok(outputs)
        });
        for slot in slots {
            if let Slot::Owned(t) = slot {
                self.pool.put(t.into_buffer());
            }
        }
        result
    }

    /// The dtype and concrete shape of each output of `layer` on inputs `ins`.
    fn output_dims(
        &self,
        layer: &crate::network::Layer,
        ins: &[&Tensor],
    ) -> Result<Vec<(DType, Vec<usize>)>> {
        let inputs: Vec<(DType, &[usize], Option<&Tensor>)> = ins
            .iter()
            .map(|t| (t.dtype(), t.shape(), Some(*t)))
            .collect();
        super::concrete_dims(layer, &inputs)
    }
}

fn check_inputs(plan: &crate::engine::EnginePlan, inputs: &[&Tensor]) -> Result<()> {
    let described: Vec<(DType, &[usize])> = inputs.iter().map(|t| (t.dtype(), t.shape())).collect();
    check_input_shapes(plan, &described)
}

/// Checks inputs given as dtype and shape against the engine's: count, dtypes, ranks, fixed
/// dims, dynamic ranges, and dims of one name agreeing across inputs.
pub(crate) fn check_input_shapes(
    plan: &crate::engine::EnginePlan,
    inputs: &[(DType, &[usize])],
) -> Result<()> {
    if inputs.len() != plan.inputs.len() {
        return Err(Error::Input(format!(
            "the engine takes {} inputs, got {}",
            plan.inputs.len(),
            inputs.len()
        )));
    }
    let mut bound: HashMap<&str, (i64, &str)> = HashMap::new();
    for (spec, &(dtype, dims)) in plan.inputs.iter().zip(inputs) {
        let shape = shape_i64(dims);
        let expected = || {
            let dims: Vec<String> = spec
                .dims
                .iter()
                .map(|d| match d {
                    Dim::Fixed(v) => v.to_string(),
                    Dim::Dynamic { name, min, max, .. } => format!("{name}∈[{min},{max}]"),
                })
                .collect();
            format!("{}[{}]", spec.dtype, dims.join(","))
        };
        if dtype != spec.dtype || shape.len() != spec.dims.len() {
            return Err(Error::Input(format!(
                "input `{}` is {}{}, expected {}",
                spec.name,
                dtype,
                ShapeDisplay(&shape),
                expected()
            )));
        }
        for (&v, d) in shape.iter().zip(&spec.dims) {
            match d {
                Dim::Fixed(f) if *f != v => {
                    return Err(Error::Input(format!(
                        "input `{}` has shape {}, expected {}",
                        spec.name,
                        ShapeDisplay(&shape),
                        expected()
                    )));
                }
                Dim::Dynamic { name, min, max, .. } => {
                    if v < *min || v > *max {
                        return Err(Error::Input(format!(
                            "input `{}`: dim `{name}` = {v} is outside the engine's range [{min}, {max}]",
                            spec.name
                        )));
                    }
                    if let Some((prev, other)) = bound.insert(name, (v, &spec.name))
                        && prev != v
                    {
                        return Err(Error::Input(format!(
                            "dim `{name}` is {prev} in input `{other}` but {v} in input `{}`",
                            spec.name
                        )));
                    }
                }
                Dim::Fixed(_) => {}
            }
        }
    }
    Ok(())
}
