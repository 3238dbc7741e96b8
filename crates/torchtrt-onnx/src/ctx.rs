//! What a converter works with: the network being built, the tensors known so far (with
//! their dtypes, shapes and, for constants, values), and the plugin registry.

use std::collections::HashMap;
use std::sync::Arc;

use torchtrt_core::layers::{InferInput, LayerKind, TypeShape};
use torchtrt_core::plugin_api::{FieldCollection, PluginKey, shape_values};
use torchtrt_core::shape_arith::ShapeGraph;
use torchtrt_core::{Backend, NetworkDefinition, PluginRegistry, Tensor, TensorId};

use crate::error::{OnnxError, Result};
use crate::node::Node;

/// The state of an import, as converters see it.
pub struct Ctx<'a> {
    /// The network being built.
    pub net: NetworkDefinition,
    /// Where plugins are looked up.
    pub registry: &'a PluginRegistry,
    pub(crate) types: HashMap<TensorId, TypeShape>,
    pub(crate) values: HashMap<TensorId, Arc<Tensor>>,
    pub(crate) names: HashMap<String, TensorId>,
    pub(crate) opsets: HashMap<String, i64>,
    pub(crate) evaluator: Option<Arc<dyn Backend>>,
    pub(crate) domain: String,
}

const MAX_FOLD_ELEMENTS: usize = 1 << 22;

impl Ctx<'_> {
    /// The opset version of the current node's domain.
    pub fn opset(&self) -> i64 {
        self.opsets.get(&self.domain).copied().unwrap_or(1)
    }

    /// The opset version imported for `domain`.
    pub fn opset_of(&self, domain: &str) -> Option<i64> {
        self.opsets.get(domain).copied()
    }

    /// The tensor bound to an ONNX value name.
    pub fn tensor(&self, name: &str) -> Option<TensorId> {
        self.names.get(name).copied()
    }

    /// Input `i` of `node`, which must be present.
    pub fn input(&self, node: &Node<'_>, i: usize) -> Result<TensorId> {
        self.opt_input(node, i)?
            .ok_or_else(|| node.err(format!("input {i} is required")))
    }

    /// Input `i` of `node`, or `None` when it is absent or empty.
    pub fn opt_input(&self, node: &Node<'_>, i: usize) -> Result<Option<TensorId>> {
        match node.proto.input.get(i).map(String::as_str) {
            None | Some("") => Ok(None),
            Some(name) => self
                .tensor(name)
                .map(Some)
                .ok_or_else(|| node.err(format!("input `{name}` is not defined before the node"))),
        }
    }

    /// Every present input of `node`, in order (absent optional ones skipped).
    pub fn inputs(&self, node: &Node<'_>) -> Result<Vec<TensorId>> {
        (0..node.num_inputs())
            .filter_map(|i| self.opt_input(node, i).transpose())
            .collect()
    }

    /// The dtype and shape of a tensor.
    pub fn ty(&self, t: TensorId) -> &TypeShape {
        &self.types[&t]
    }

    /// The rank of a tensor.
    pub fn rank(&self, t: TensorId) -> usize {
        self.types[&t].shape.len()
    }

    /// The concrete shape of a tensor, when every dim is known.
    pub fn known_shape(&self, t: TensorId) -> Option<Vec<i64>> {
        shape_values(&self.types[&t].shape)
    }

    /// The value of a tensor known at import time (initializers, constants, folded layers).
    pub fn value(&self, t: TensorId) -> Option<&Tensor> {
        self.values.get(&t).map(|v| v.as_ref())
    }

    /// The value of a known integer tensor, as `i64`s.
    pub fn value_i64s(&self, t: TensorId) -> Option<Vec<i64>> {
        self.value(t)?.to_i64_vec()
    }

    /// The value of a known numeric tensor, as `f64`s.
    pub fn value_f64s(&self, t: TensorId) -> Option<Vec<f64>> {
        Some(self.value(t)?.to_f64_vec())
    }

    /// Adds a single-output layer for `node` and returns its output.
    pub fn add(
        &mut self,
        node: &Node<'_>,
        kind: impl Into<LayerKind>,
        inputs: &[TensorId],
    ) -> Result<TensorId> {
        let out = self.add_multi(node, kind, inputs)?;
        Ok(out[0])
    }

    /// Adds a layer for `node` (named after the node; later layers of the same node get a
    /// suffix) and infers its outputs; values are computed when all inputs are known.
    pub fn add_multi(
        &mut self,
        node: &Node<'_>,
        kind: impl Into<LayerKind>,
        inputs: &[TensorId],
    ) -> Result<Vec<TensorId>> {
        let kind = kind.into();
        let name = self.net.unique_name(&node.name);
        let outs = self
            .net
            .add_layer(&name, kind.clone(), inputs)
            .map_err(|e| wrap(node, e))?;
        self.infer(node, &name, &kind, inputs, &outs)?;
        Ok(outs)
    }

    /// Adds a constant tensor.
    pub fn constant(&mut self, node: &Node<'_>, value: Tensor) -> Result<TensorId> {
        let name = self.net.unique_name(&format!("{}/const", node.name));
        self.add_named_constant(&name, value)
            .map_err(|e| wrap(node, e))
    }

    pub(crate) fn add_named_constant(
        &mut self,
        name: &str,
        value: Tensor,
    ) -> torchtrt_core::Result<TensorId> {
        let name = self.net.unique_name(name);
        let value = Arc::new(value);
        let t = self.net.add_constant(&name, (*value).clone())?;
        self.types.insert(
            t,
            TypeShape::new(
                value.dtype(),
                value.shape().iter().map(|&d| (d as i64).into()).collect(),
            ),
        );
        self.values.insert(t, value);
        Ok(t)
    }

    /// Creates a plugin through the registry and adds it as a layer for `node`.
    pub fn plugin(
        &mut self,
        node: &Node<'_>,
        key: &PluginKey,
        fields: &FieldCollection,
        inputs: &[TensorId],
    ) -> Result<Vec<TensorId>> {
        let name = self.net.unique_name(&node.name);
        let outs = self
            .net
            .add_plugin(&name, self.registry, key, fields, inputs)
            .map_err(|e| wrap(node, e))?;
        let kind = self.net.layers().last().map(|l| l.kind.clone());
        if let Some(kind) = kind {
            self.infer(node, &name, &kind, inputs, &outs)?;
        }
        Ok(outs)
    }

    fn infer(
        &mut self,
        node: &Node<'_>,
        name: &str,
        kind: &LayerKind,
        inputs: &[TensorId],
        outs: &[TensorId],
    ) -> Result<()> {
        let op = kind.op();
        let ins: Vec<InferInput<'_>> = inputs
            .iter()
            .map(|t| {
                let ty = &self.types[t];
                InferInput {
                    dtype: ty.dtype,
                    shape: &ty.shape,
                    value: self.values.get(t).map(|v| v.as_ref()),
                }
            })
            .collect();
        let mut types = op
            .infer(&ins)
            .map_err(|m| node.err(format!("layer `{name}` ({}): {m}", op.kind())))?;
        torchtrt_core::layers::name_unknown_dims(op, name, &mut types);
        torchtrt_core::shape_arith::sharpen(self, name, kind, inputs, &mut types);
        let values = op
            .eval_from_shapes(&ins)
            .or_else(|| self.evaluate(kind, &ins, &types));
        drop(ins);
        if let Some(values) = values {
            for (t, v) in outs.iter().zip(values) {
                self.values.insert(*t, Arc::new(v));
            }
        }
        for (t, ty) in outs.iter().zip(types) {
            self.types.insert(*t, ty);
        }
        Ok(())
    }

    fn evaluate(
        &self,
        kind: &LayerKind,
        ins: &[InferInput<'_>],
        types: &[TypeShape],
    ) -> Option<Vec<Tensor>> {
        let backend = self.evaluator.as_ref()?;
        if matches!(kind, LayerKind::Plugin(_) | LayerKind::Constant(_)) || !kind.op().foldable() {
            return None;
        }
        let values: Vec<&Tensor> = ins.iter().map(|i| i.value).collect::<Option<_>>()?;
        let mut outs = Vec::with_capacity(types.len());
        for ty in types {
            let dims = shape_values(&ty.shape)?;
            let dims: Vec<usize> = dims
                .iter()
                .map(|&d| usize::try_from(d).ok())
                .collect::<Option<_>>()?;
            if dims.iter().product::<usize>() > MAX_FOLD_ELEMENTS {
                return None;
            }
            outs.push(Tensor::zeros(ty.dtype, &dims));
        }
        let kernel = backend.prepare(kind, ins).ok()?;
        kernel.execute(&values, &mut outs).ok()?;
        Some(outs)
    }
}

impl ShapeGraph for Ctx<'_> {
    fn ty(&self, t: TensorId) -> &TypeShape {
        &self.types[&t]
    }

    fn value(&self, t: TensorId) -> Option<&Tensor> {
        self.values.get(&t).map(|v| v.as_ref())
    }

    fn producer(&self, t: TensorId) -> Option<(&LayerKind, &[TensorId])> {
        let layer = self.net.producer(t)?;
        Some((&layer.kind, &layer.inputs[..]))
    }
}

/// Turns a core error about a layer of `node` into a node error.
pub(crate) fn wrap(node: &Node<'_>, e: torchtrt_core::Error) -> OnnxError {
    node.err(e.to_string())
}
