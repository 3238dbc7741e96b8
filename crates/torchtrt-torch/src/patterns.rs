//! Op sequences that a plugin computes in one pass. Before conversion each match is
//! replaced by one node the plugin fallback converts:
//!
//! - `x / expand(clamp_min(linalg_vector_norm(x, p, dim, keepdim=True), eps))`
//!   (`F.normalize`, as exported or decomposed) → `torch_tensorrt::NormalizePlugin` with
//!   `mode = normalize`.
//!
//! A match is only taken when its inner values feed nothing else and are no graph outputs.

use std::collections::HashMap;

use crate::schema::{Argument, NamedArgument, Node};

/// Returns the nodes with every pattern replaced.
pub(crate) fn rewrite(nodes: &[Node]) -> Vec<Node> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in &n.outputs {
            if let Argument::Tensor(name) = o {
                producer.insert(name, i);
            }
        }
        for a in &n.inputs {
            match &a.arg {
                Argument::Tensor(name) => *uses.entry(name).or_default() += 1,
                Argument::Tensors(names) => {
                    for name in names {
                        *uses.entry(name).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
    }
    let mut drop = vec![false; nodes.len()];
    let mut replace: HashMap<usize, Node> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if let Some((inner, node)) = normalize(nodes, &producer, &uses, n) {
            for k in inner {
                drop[k] = true;
            }
            replace.insert(i, node);
        }
    }
    nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop[*i])
        .map(|(i, n)| replace.remove(&i).unwrap_or_else(|| n.clone()))
        .collect()
}

fn tensor_arg<'a>(n: &'a Node, name: &str) -> Option<&'a str> {
    n.inputs
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| match &a.arg {
            Argument::Tensor(t) => Some(t.as_str()),
            _ => None,
        })
}

fn arg<'a>(n: &'a Node, name: &str) -> Option<&'a Argument> {
    n.inputs.iter().find(|a| a.name == name).map(|a| &a.arg)
}

/// The node producing `value` if its target is one of `targets` and `value` has one use.
fn sole<'a>(
    nodes: &'a [Node],
    producer: &HashMap<&str, usize>,
    uses: &HashMap<&str, usize>,
    value: &str,
    targets: &[&str],
) -> Option<(usize, &'a Node)> {
    let i = *producer.get(value)?;
    let n = &nodes[i];
    (targets.contains(&n.target.as_str()) && uses.get(value) == Some(&1)).then_some((i, n))
}

fn normalize(
    nodes: &[Node],
    producer: &HashMap<&str, usize>,
    uses: &HashMap<&str, usize>,
    div: &Node,
) -> Option<(Vec<usize>, Node)> {
    if div.target != "torch.ops.aten.div.Tensor" || arg(div, "rounding_mode").is_some() {
        return None;
    }
    let x = tensor_arg(div, "self")?;
    let denom = tensor_arg(div, "other")?;
    let (ie, expand) = sole(
        nodes,
        producer,
        uses,
        denom,
        &[
            "torch.ops.aten.expand_as.default",
            "torch.ops.aten.expand.default",
        ],
    )?;
    let clamped = tensor_arg(expand, "self")?;
    let (ic, clamp) = sole(
        nodes,
        producer,
        uses,
        clamped,
        &[
            "torch.ops.aten.clamp_min.default",
            "torch.ops.aten.clamp.default",
        ],
    )?;
    if arg(clamp, "max").is_some_and(|a| *a != Argument::None) {
        return None;
    }
    let eps = match arg(clamp, "min")? {
        Argument::Float(v) => *v,
        Argument::Int(v) => *v as f64,
        _ => return None,
    };
    let normed = tensor_arg(clamp, "self")?;
    let (iv, norm) = sole(
        nodes,
        producer,
        uses,
        normed,
        &["torch.ops.aten.linalg_vector_norm.default"],
    )?;
    if tensor_arg(norm, "self")? != x || arg(norm, "keepdim") != Some(&Argument::Bool(true)) {
        return None;
    }
    let order = match arg(norm, "ord") {
        None => 2.0,
        Some(Argument::Float(v)) => *v,
        Some(Argument::Int(v)) => *v as f64,
        _ => return None,
    };
    let dims = match arg(norm, "dim")? {
        Argument::Ints(d) => d.clone(),
        Argument::Int(d) => vec![*d],
        _ => return None,
    };
    let named = |name: &str, arg: Argument| NamedArgument {
        name: name.into(),
        arg,
        kind: Some(1),
    };
    let node = Node {
        target: "torch.ops.torch_tensorrt.NormalizePlugin".into(),
        inputs: vec![
            named("self", Argument::Tensor(x.to_string())),
            named("order", Argument::Float(order)),
            named("axes", Argument::Ints(dims)),
            named("keep_dims", Argument::Int(0)),
            named("eps", Argument::Float(eps)),
            named("mode", Argument::String("normalize".into())),
        ],
        outputs: div.outputs.clone(),
        metadata: div.metadata.clone(),
        name: div.name.clone(),
    };
    Some((vec![ie, ic, iv], node))
}
