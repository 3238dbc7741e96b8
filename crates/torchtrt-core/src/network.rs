//! `NetworkDefinition`: inputs with dynamic dims, layers, outputs.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, ShapeExpr};

use torchtrt_plugin_api::{FieldCollection, PluginKey};

use crate::error::{Error, Result};
use crate::layers::{Constant, LayerKind, PluginLayer};
use crate::registry::PluginRegistry;
use crate::tensor::Tensor;

/// Identifies a tensor of a network or engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TensorId(pub u32);

impl TensorId {
    /// The index into the tensor table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One dimension of a network input: fixed, or dynamic with a name and a range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dim {
    /// A known size.
    Fixed(i64),
    /// A size known only at run time. Inputs that use the same name share the value.
    Dynamic {
        /// Symbol name, e.g. `batch`.
        name: String,
        /// Smallest accepted value.
        min: i64,
        /// The value to optimise for.
        opt: i64,
        /// Largest accepted value.
        max: i64,
    },
}

impl Dim {
    /// A dynamic dim.
    pub fn dynamic(name: &str, min: i64, opt: i64, max: i64) -> Dim {
        Dim::Dynamic {
            name: name.to_string(),
            min,
            opt,
            max,
        }
    }

    /// The dim as an expression.
    pub fn expr(&self) -> DimExpr {
        match self {
            Dim::Fixed(v) => DimExpr::Const(*v),
            Dim::Dynamic { name, .. } => DimExpr::sym(name),
        }
    }

    /// `(min, opt, max)`.
    pub fn range(&self) -> (i64, i64, i64) {
        match self {
            Dim::Fixed(v) => (*v, *v, *v),
            Dim::Dynamic { min, opt, max, .. } => (*min, *opt, *max),
        }
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::Fixed(v)
    }
}

/// A network input.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetworkInput {
    /// Name users bind data to.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dims, fixed or dynamic.
    pub dims: Vec<Dim>,
    /// The tensor it defines.
    pub tensor: TensorId,
}

impl NetworkInput {
    /// The shape as expressions.
    pub fn shape(&self) -> ShapeExpr {
        self.dims.iter().map(Dim::expr).collect()
    }
}

/// A layer: a kind with its parameters, input tensors and output tensors.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Layer {
    /// Unique name, used in every error about it.
    pub name: String,
    /// Kind and parameters.
    pub kind: LayerKind,
    /// Input tensors in order.
    pub inputs: Vec<TensorId>,
    /// Output tensors in order.
    pub outputs: Vec<TensorId>,
}

/// A network: the graph the builder turns into an engine (TensorRT's
/// `INetworkDefinition`). Layers are added in an order where every input already exists,
/// so the definition is acyclic by construction.
#[derive(Clone, Debug, Default)]
pub struct NetworkDefinition {
    tensor_names: Vec<String>,
    /// Per tensor, the index of the layer producing it (`None` for inputs).
    producers: Vec<Option<usize>>,
    inputs: Vec<NetworkInput>,
    layers: Vec<Layer>,
    outputs: Vec<(String, TensorId)>,
    names: HashMap<String, usize>,
}

impl NetworkDefinition {
    /// An empty network.
    pub fn new() -> NetworkDefinition {
        NetworkDefinition::default()
    }

    fn new_tensor(&mut self, name: String) -> TensorId {
        self.tensor_names.push(name);
        self.producers.push(None);
        TensorId(self.tensor_names.len() as u32 - 1)
    }

    fn check(&self, t: TensorId, what: &str) -> Result<()> {
        if t.index() < self.tensor_names.len() {
            Ok(())
        } else {
            Err(Error::Network(format!(
                "{what} refers to unknown tensor #{}",
                t.0
            )))
        }
    }

    /// Adds an input. Dynamic dims need `1 ≤ min ≤ opt ≤ max`, and a name used by several
    /// inputs must have the same range everywhere.
    pub fn add_input(&mut self, name: &str, dtype: DType, dims: &[Dim]) -> Result<TensorId> {
        if self.inputs.iter().any(|i| i.name == name) {
            return Err(Error::Network(format!("input `{name}` is defined twice")));
        }
        for d in dims {
            let (min, opt, max) = d.range();
            let ok = match d {
                Dim::Fixed(v) => *v >= 0,
                Dim::Dynamic { .. } => 0 <= min && min <= opt && opt <= max,
            };
            if !ok {
                return Err(Error::Network(format!(
                    "input `{name}`: invalid dim {d:?} (need 0 ≤ min ≤ opt ≤ max)"
                )));
            }
            if let Dim::Dynamic { name: sym, .. } = d {
                for other in self.inputs.iter().flat_map(|i| &i.dims) {
                    if let Dim::Dynamic { name: o, .. } = other
                        && o == sym
                        && other.range() != d.range()
                    {
                        return Err(Error::Network(format!(
                            "input `{name}`: dim `{sym}` has range {:?} here and {:?} elsewhere",
                            d.range(),
                            other.range()
                        )));
                    }
                }
            }
        }
        let tensor = self.new_tensor(name.to_string());
        self.inputs.push(NetworkInput {
            name: name.to_string(),
            dtype,
            dims: dims.to_vec(),
            tensor,
        });
        Ok(tensor)
    }

    /// Adds a layer and returns its output tensors. Its inputs must exist and its name must
    /// be unique; the input count must fit the kind.
    pub fn add_layer(
        &mut self,
        name: &str,
        kind: impl Into<LayerKind>,
        inputs: &[TensorId],
    ) -> Result<Vec<TensorId>> {
        let kind = kind.into();
        let op = kind.op();
        if self.names.contains_key(name) {
            return Err(Error::Network(format!("layer name `{name}` is used twice")));
        }
        for &t in inputs {
            self.check(t, &format!("layer `{name}`"))?;
        }
        let (lo, hi) = op.arity();
        if inputs.len() < lo || inputs.len() > hi {
            return Err(Error::Layer {
                layer: name.to_string(),
                kind: op.kind(),
                message: format!("takes {lo} to {hi} inputs, got {}", inputs.len()),
            });
        }
        let n = op.num_outputs();
        let outputs = (0..n)
            .map(|i| {
                let tname = if n == 1 {
                    name.to_string()
                } else {
                    format!("{name}:{i}")
                };
                self.new_tensor(tname)
            })
            .collect::<Vec<_>>();
        for t in &outputs {
            self.producers[t.index()] = Some(self.layers.len());
        }
        self.names.insert(name.to_string(), self.layers.len());
        self.layers.push(Layer {
            name: name.to_string(),
            kind,
            inputs: inputs.to_vec(),
            outputs: outputs.clone(),
        });
        Ok(outputs)
    }

    /// Adds a single-output layer and returns its output.
    pub fn add(
        &mut self,
        name: &str,
        kind: impl Into<LayerKind>,
        inputs: &[TensorId],
    ) -> Result<TensorId> {
        let out = self.add_layer(name, kind, inputs)?;
        match out.as_slice() {
            [t] => Ok(*t),
            _ => Err(Error::Network(format!(
                "layer `{name}` has {} outputs; use add_layer",
                out.len()
            ))),
        }
    }

    /// Creates a plugin through `registry` (fields checked against the creator's schema) and
    /// adds it as a layer; returns its outputs.
    pub fn add_plugin(
        &mut self,
        name: &str,
        registry: &PluginRegistry,
        key: &PluginKey,
        fields: &FieldCollection,
        inputs: &[TensorId],
    ) -> Result<Vec<TensorId>> {
        let (plugin, entry) = registry.create(key, name, fields)?;
        let library = entry.library.map(|p| p.display().to_string());
        let mut layer = PluginLayer::new(key.clone(), plugin, Some(entry.provider), library);
        layer.package = entry.package;
        self.add_layer(name, layer, inputs)
    }

    /// Adds a constant layer holding `value`.
    pub fn add_constant(&mut self, name: &str, value: Tensor) -> Result<TensorId> {
        self.add(name, Constant::new(value), &[])
    }

    /// Marks `tensor` as a network output named `name`.
    pub fn mark_output(&mut self, tensor: TensorId, name: &str) -> Result<()> {
        self.check(tensor, &format!("output `{name}`"))?;
        if self.outputs.iter().any(|(n, _)| n == name) {
            return Err(Error::Network(format!("output `{name}` is marked twice")));
        }
        self.outputs.push((name.to_string(), tensor));
        Ok(())
    }

    /// A unique layer name starting with `base`.
    pub fn unique_name(&self, base: &str) -> String {
        if !self.names.contains_key(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !self.names.contains_key(n))
            .unwrap_or_default()
    }

    /// The inputs.
    pub fn inputs(&self) -> &[NetworkInput] {
        &self.inputs
    }

    /// The layers, in the order added.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// The layer producing `t`; `None` for inputs and unknown tensors.
    pub fn producer(&self, t: TensorId) -> Option<&Layer> {
        let layer = (*self.producers.get(t.index())?)?;
        self.layers.get(layer)
    }

    /// The outputs: name and tensor.
    pub fn outputs(&self) -> &[(String, TensorId)] {
        &self.outputs
    }

    /// The number of tensors.
    pub fn num_tensors(&self) -> usize {
        self.tensor_names.len()
    }

    /// A tensor's name (the input name, or the producing layer's name).
    pub fn tensor_name(&self, t: TensorId) -> &str {
        self.tensor_names.get(t.index()).map_or("?", String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{Elementwise, ElementwiseOp, TopK};

    #[test]
    fn every_output_knows_its_producer() {
        let mut net = NetworkDefinition::new();
        let x = net.add_input("x", DType::F32, &[Dim::Fixed(4)]).unwrap();
        let two = net
            .add_constant("two", Tensor::from_vec(&[1], vec![2.0f32]).unwrap())
            .unwrap();
        let y = net
            .add("y", Elementwise::new(ElementwiseOp::Mul), &[x, two])
            .unwrap();
        let k = net
            .add_constant("k", Tensor::from_vec(&[1], vec![2i64]).unwrap())
            .unwrap();
        let top = TopK {
            axis: 0,
            largest: true,
            sorted: true,
        };
        let top = net.add_layer("top", top, &[y, k]).unwrap();
        assert!(net.producer(x).is_none());
        assert_eq!(net.producer(two).map(|l| l.name.as_str()), Some("two"));
        assert_eq!(
            net.producer(y).map(|l| l.inputs.clone()),
            Some(vec![x, two])
        );
        for t in top {
            assert_eq!(net.producer(t).map(|l| l.name.as_str()), Some("top"));
        }
        assert!(net.producer(TensorId(99)).is_none());
    }
}
