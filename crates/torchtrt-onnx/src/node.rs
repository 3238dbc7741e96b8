//! A node being converted: its identity and typed access to its attributes.

use torchtrt_core::Tensor;

use crate::error::OnnxError;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor::tensor_from_proto;

/// A node of the graph, with the name used for its layers and errors.
pub struct Node<'a> {
    /// The protobuf node.
    pub proto: &'a NodeProto,
    /// The node's name, or `op_type#index` when it has none.
    pub name: String,
}

impl<'a> Node<'a> {
    /// Wraps node number `index` of the graph.
    pub fn new(proto: &'a NodeProto, index: usize) -> Node<'a> {
        let name = match proto.name() {
            "" => format!("{}#{index}", proto.op_type()),
            n => n.to_string(),
        };
        Node { proto, name }
    }

    /// The op type, e.g. `Conv`.
    pub fn op_type(&self) -> &str {
        self.proto.op_type()
    }

    /// The domain, with `ai.onnx` normalised to `""`.
    pub fn domain(&self) -> &str {
        normalize_domain(self.proto.domain())
    }

    /// `domain::op_type`, or `op_type` for the default domain.
    pub fn op_label(&self) -> String {
        match self.domain() {
            "" => self.op_type().to_string(),
            d => format!("{d}::{}", self.op_type()),
        }
    }

    /// An error about this node.
    pub fn err(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Node {
            node: self.name.clone(),
            op: self.op_label(),
            message: message.into(),
        }
    }

    /// Number of inputs, counting empty (omitted) optional ones.
    pub fn num_inputs(&self) -> usize {
        self.proto.input.len()
    }

    /// The attribute called `name`.
    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name() == name)
    }

    fn typed(
        &self,
        name: &str,
        ty: AttributeType,
    ) -> Result<Option<&'a AttributeProto>, OnnxError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type() == ty => Ok(Some(a)),
            Some(a) => Err(self.err(format!(
                "attribute `{name}` is {}, expected {}",
                a.r#type().as_str_name(),
                ty.as_str_name()
            ))),
        }
    }

    /// An INT attribute.
    pub fn int(&self, name: &str) -> Result<Option<i64>, OnnxError> {
        Ok(self.typed(name, AttributeType::Int)?.map(|a| a.i()))
    }

    /// An INT attribute or its default.
    pub fn int_or(&self, name: &str, default: i64) -> Result<i64, OnnxError> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// A boolean INT attribute (0 or 1, as onnxruntime requires) or its default; any other
    /// value is an error naming the node and the attribute.
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, OnnxError> {
        match self.int(name)? {
            None => Ok(default),
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => Err(self.err(format!("attribute `{name}` is {v}, expected 0 or 1"))),
        }
    }

    /// A FLOAT attribute.
    pub fn float(&self, name: &str) -> Result<Option<f32>, OnnxError> {
        Ok(self.typed(name, AttributeType::Float)?.map(|a| a.f()))
    }

    /// A FLOAT attribute or its default.
    pub fn float_or(&self, name: &str, default: f32) -> Result<f32, OnnxError> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    /// A STRING attribute (UTF-8).
    pub fn string(&self, name: &str) -> Result<Option<String>, OnnxError> {
        self.typed(name, AttributeType::String)?
            .map(|a| {
                String::from_utf8(a.s().to_vec())
                    .map_err(|_| self.err(format!("attribute `{name}` is not UTF-8")))
            })
            .transpose()
    }

    /// A STRING attribute or its default.
    pub fn string_or(&self, name: &str, default: &str) -> Result<String, OnnxError> {
        Ok(self.string(name)?.unwrap_or_else(|| default.to_string()))
    }

    /// An INTS attribute.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, OnnxError> {
        Ok(self
            .typed(name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    /// A FLOATS attribute.
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, OnnxError> {
        Ok(self
            .typed(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }

    /// A STRINGS attribute.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, OnnxError> {
        Ok(self.typed(name, AttributeType::Strings)?.map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }))
    }

    /// A TENSOR attribute.
    pub fn tensor(&self, name: &str) -> Result<Option<Tensor>, OnnxError> {
        self.typed(name, AttributeType::Tensor)?
            .map(|a| {
                let t =
                    a.t.as_ref()
                        .ok_or_else(|| self.err(format!("attribute `{name}` has no tensor")))?;
                tensor_from_proto(t, None).map_err(|m| self.err(m))
            })
            .transpose()
    }
}

/// `ai.onnx` and `""` name the same (default) domain.
pub fn normalize_domain(domain: &str) -> &str {
    if domain == "ai.onnx" { "" } else { domain }
}
