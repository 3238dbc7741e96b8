//! A node being converted: its op name (namespace, name, overload), its name for errors,
//! and its arguments by schema name.

use crate::error::TorchError;
use crate::schema::{self, Argument};

/// A torch op name: `torch.ops.aten.add.Tensor` is `aten::add.Tensor`; a Python target such
/// as `_operator.mul` has namespace `_operator`, name `mul` and no overload.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpName {
    /// `aten`, `torchvision`, `_operator`, …
    pub namespace: String,
    /// `add`, `nms`, …
    pub name: String,
    /// `Tensor`, `default`, … (empty when the target has none).
    pub overload: String,
}

impl OpName {
    /// Parses a serialized node target.
    pub fn parse(target: &str) -> OpName {
        let (rest, is_op) = match target.strip_prefix("torch.ops.") {
            Some(r) => (r, true),
            None => (target, false),
        };
        let parts: Vec<&str> = rest.split('.').collect();
        let (namespace, name, overload) = match (is_op, parts.as_slice()) {
            (true, [ns, name, overload @ ..]) => (*ns, *name, overload.join(".")),
            (_, [ns @ .., name]) if !ns.is_empty() => {
                return OpName {
                    namespace: ns.join("."),
                    name: name.to_string(),
                    overload: String::new(),
                };
            }
            _ => ("", rest, String::new()),
        };
        OpName {
            namespace: namespace.to_string(),
            name: name.to_string(),
            overload,
        }
    }

    /// Parses `ns::name` or `ns::name.overload`.
    pub fn from_label(label: &str) -> OpName {
        let (namespace, rest) = label.split_once("::").unwrap_or(("", label));
        let (name, overload) = rest.split_once('.').unwrap_or((rest, ""));
        OpName {
            namespace: namespace.to_string(),
            name: name.to_string(),
            overload: overload.to_string(),
        }
    }

    /// `ns::name.overload` (`ns::name` without one).
    pub fn label(&self) -> String {
        match (self.namespace.as_str(), self.overload.as_str()) {
            ("", _) => self.name.clone(),
            (ns, "") => format!("{ns}::{}", self.name),
            (ns, ov) => format!("{ns}::{}.{ov}", self.name),
        }
    }
}

/// A node of the graph, with the name used for its layers and errors.
pub struct Node<'a> {
    /// The serialized node.
    pub raw: &'a schema::Node,
    /// The node's name (its own, else its first output's, else `op#index`).
    pub name: String,
    /// The op.
    pub op: OpName,
}

impl<'a> Node<'a> {
    /// Wraps node number `index` of the graph.
    pub fn new(raw: &'a schema::Node, index: usize) -> Node<'a> {
        let op = OpName::parse(&raw.target);
        let name = raw
            .name
            .clone()
            .or_else(|| raw.outputs.first().and_then(output_name))
            .unwrap_or_else(|| format!("{}#{index}", op.name));
        Node { raw, name, op }
    }

    /// An error about this node.
    pub fn err(&self, message: impl Into<String>) -> TorchError {
        TorchError::Node {
            node: self.name.clone(),
            op: self.op.label(),
            message: message.into(),
        }
    }

    /// The argument the op's schema calls `name`, when given.
    pub fn arg(&self, name: &str) -> Option<&'a Argument> {
        self.raw
            .inputs
            .iter()
            .find(|a| a.name == name)
            .map(|a| &a.arg)
    }

    /// The argument at schema position `i` (positional arguments come first, in order).
    pub fn arg_at(&self, i: usize) -> Option<&'a Argument> {
        self.raw.inputs.get(i).map(|a| &a.arg)
    }

    /// Every argument with its schema name.
    pub fn args(&self) -> impl Iterator<Item = (&'a str, &'a Argument)> {
        self.raw.inputs.iter().map(|a| (a.name.as_str(), &a.arg))
    }
}

/// The value name an output argument binds, if it binds one.
pub fn output_name(a: &Argument) -> Option<String> {
    match a {
        Argument::Tensor(n) => Some(n.clone()),
        Argument::SymInt(schema::SymIntArg::Name(n)) => Some(n.clone()),
        Argument::SymFloat(schema::SymIntArgFloat::Name(n)) => Some(n.clone()),
        Argument::SymBool(schema::SymBoolArg::Name(n)) => Some(n.clone()),
        Argument::Tensors(ns) => ns.first().cloned(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_into_namespace_name_overload() {
        let op = OpName::parse("torch.ops.aten.add.Tensor");
        assert_eq!(
            (
                op.namespace.as_str(),
                op.name.as_str(),
                op.overload.as_str()
            ),
            ("aten", "add", "Tensor")
        );
        assert_eq!(op.label(), "aten::add.Tensor");
        let op = OpName::parse("torch.ops.torchvision.nms.default");
        assert_eq!(op.label(), "torchvision::nms.default");
        let op = OpName::parse("_operator.mul");
        assert_eq!(op.label(), "_operator::mul");
        let op = OpName::parse("torch.ops.higher_order.cond");
        assert_eq!(op.label(), "higher_order::cond");
        assert_eq!(
            OpName::from_label("aten::relu_"),
            OpName::parse("torch.ops.aten.relu_")
        );
        assert_eq!(
            OpName::from_label("aten::add.Tensor"),
            OpName::parse("torch.ops.aten.add.Tensor")
        );
    }
}
