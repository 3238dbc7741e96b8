//! Graph patterns that exporters spell out op by op and that a plugin computes in one pass.
//! Before conversion, each match is replaced by one node the converters know:
//!
//! - `x·0.5·(1 + erf(x/√2))` (PyTorch's exact GELU) → `Gelu` (approximate = none);
//! - `x·0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` → `Gelu` (approximate = tanh);
//! - `x / expand(max(‖x‖ₚ, eps))` (`F.normalize`: ReduceL2/L1 → Clip or Max → Expand? → Div)
//!   → `torch_tensorrt::NormalizePlugin` (mode = normalize), through the plugin fallback.
//!
//! Both `Gelu` forms then become `CustomGeluPluginDynamic`. A match is only taken when its
//! inner tensors feed nothing else and are no graph outputs.

use std::collections::HashMap;

use crate::node::normalize_domain;
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, GraphProto, NodeProto};
use crate::tensor::tensor_from_proto;

struct Graph<'a> {
    nodes: &'a [NodeProto],
    producer: HashMap<&'a str, usize>,
    uses: HashMap<&'a str, usize>,
    consts: HashMap<&'a str, f64>,
    int_lists: HashMap<&'a str, Vec<i64>>,
}

impl<'a> Graph<'a> {
    fn new(graph: &'a GraphProto, nodes: &'a [NodeProto]) -> Graph<'a> {
        let mut producer = HashMap::new();
        let mut uses: HashMap<&str, usize> = HashMap::new();
        let mut consts = HashMap::new();
        let mut int_lists = HashMap::new();
        for init in &graph.initializer {
            if let Some(v) = scalar_of(init) {
                consts.insert(init.name(), v);
            }
            if let Some(v) = tensor_from_proto(init, None)
                .ok()
                .and_then(|t| t.to_i64_vec())
            {
                int_lists.insert(init.name(), v);
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            for o in &n.output {
                producer.insert(o.as_str(), i);
            }
            for inp in &n.input {
                *uses.entry(inp.as_str()).or_default() += 1;
            }
            let value = n
                .attribute
                .iter()
                .find(|a| a.name() == "value")
                .and_then(|a| a.t.as_ref());
            if n.op_type() == "Constant"
                && let (Some(t), Some(out)) = (value, n.output.first())
            {
                if let Some(v) = scalar_of(t) {
                    consts.insert(out.as_str(), v);
                }
                if let Some(v) = tensor_from_proto(t, None).ok().and_then(|t| t.to_i64_vec()) {
                    int_lists.insert(out.as_str(), v);
                }
            }
        }
        for o in &graph.output {
            *uses.entry(o.name()).or_default() += 1;
        }
        Graph {
            nodes,
            producer,
            uses,
            consts,
            int_lists,
        }
    }

    /// The node producing `name` if it is `op` in the default domain and `name` has exactly
    /// one use (so the node may be absorbed).
    fn sole(&self, name: &str, op: &str) -> Option<usize> {
        let i = *self.producer.get(name)?;
        let n = &self.nodes[i];
        (n.op_type() == op
            && normalize_domain(n.domain()).is_empty()
            && self.uses.get(name) == Some(&1))
        .then_some(i)
    }

    /// For a binary node with one operand ≈ `c` (a known scalar), the other operand.
    fn other_than(&self, n: &'a NodeProto, c: f64, tol: f64) -> Option<&'a str> {
        let [a, b] = n.input.as_slice() else {
            return None;
        };
        let near = |s: &str| self.consts.get(s).is_some_and(|v| (v - c).abs() <= tol);
        if near(b) {
            Some(a)
        } else if near(a) {
            Some(b)
        } else {
            None
        }
    }

    fn is_const(&self, name: &str, c: f64) -> bool {
        self.consts.get(name).is_some_and(|v| (v - c).abs() <= 1e-6)
    }
}

fn scalar_of(t: &crate::proto::TensorProto) -> Option<f64> {
    let v = tensor_from_proto(t, None).ok()?;
    (v.numel() == 1).then(|| v.to_f64_vec()[0])
}

/// A match: nodes to drop, and the node that replaces the last of them.
struct Rewrite {
    drop: Vec<usize>,
    last: usize,
    node: NodeProto,
}

/// Returns the graph's nodes with every pattern replaced.
pub(crate) fn rewrite(graph: &GraphProto) -> Vec<NodeProto> {
    let mut nodes = graph.node.clone();
    loop {
        let g = Graph::new(graph, &nodes);
        let found = (0..nodes.len()).find_map(|i| gelu(&g, i).or_else(|| normalize(&g, i)));
        let Some(r) = found else {
            return nodes;
        };
        let mut out = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.into_iter().enumerate() {
            if i == r.last {
                out.push(r.node.clone());
            } else if !r.drop.contains(&i) {
                out.push(n);
            }
        }
        nodes = out;
    }
}

fn attr_string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..AttributeProto::default()
    }
}

fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..AttributeProto::default()
    }
}

fn attr_ints(name: &str, v: Vec<i64>, ty: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(ty as i32),
        ints: if ty == AttributeType::Ints {
            v.clone()
        } else {
            vec![]
        },
        i: (ty == AttributeType::Int).then(|| v.first().copied().unwrap_or(0)),
        ..AttributeProto::default()
    }
}

/// A product `x · 0.5 · (1 + core)` spelled with two `Mul`s ending at `end`, in any order
/// and association; then `core` is checked against the exact and the tanh forms.
fn gelu(g: &Graph<'_>, end: usize) -> Option<Rewrite> {
    let n = &g.nodes[end];
    if n.op_type() != "Mul" || !normalize_domain(n.domain()).is_empty() || n.input.len() != 2 {
        return None;
    }
    for (outer, inner_name) in [(&n.input[0], &n.input[1]), (&n.input[1], &n.input[0])] {
        let Some(m) = g.sole(inner_name, "Mul") else {
            continue;
        };
        let [a, b] = g.nodes[m].input.as_slice() else {
            continue;
        };
        let mut factors: Vec<&str> = vec![a, b, outer];
        let Some(half) = factors.iter().position(|f| g.is_const(f, 0.5)) else {
            continue;
        };
        factors.remove(half);
        for (ai, xi) in [(0usize, 1usize), (1, 0)] {
            let Some(add) = g.sole(factors[ai], "Add") else {
                continue;
            };
            let Some(core) = g.other_than(&g.nodes[add], 1.0, 1e-6) else {
                continue;
            };
            let x = factors[xi];
            let mut drop = vec![m, add];
            if let Some(r) = erf_core(g, core, x) {
                drop.extend(r);
                return Some(build_gelu(g, end, x, "none", drop));
            }
            if let Some(r) = tanh_core(g, core, x) {
                drop.extend(r);
                return Some(build_gelu(g, end, x, "tanh", drop));
            }
        }
    }
    None
}

fn build_gelu(g: &Graph<'_>, end: usize, x: &str, approximate: &str, drop: Vec<usize>) -> Rewrite {
    let last = &g.nodes[end];
    Rewrite {
        drop,
        last: end,
        node: NodeProto {
            input: vec![x.to_string()],
            output: last.output.clone(),
            name: Some(format!("{}/gelu", last.name())),
            op_type: Some("Gelu".into()),
            attribute: vec![attr_string("approximate", approximate)],
            ..NodeProto::default()
        },
    }
}

/// `Erf(Div(x, √2))` or `Erf(Mul(x, 1/√2))`.
fn erf_core(g: &Graph<'_>, erf_out: &str, x: &str) -> Option<Vec<usize>> {
    let e = g.sole(erf_out, "Erf")?;
    let arg = g.nodes[e].input.first()?;
    if let Some(d) = g.sole(arg, "Div")
        && let [num, den] = g.nodes[d].input.as_slice()
        && num == x
        && g.consts
            .get(den.as_str())
            .is_some_and(|v| (v - std::f64::consts::SQRT_2).abs() < 1e-4)
    {
        return Some(vec![d, e]);
    }
    let m = g.sole(arg, "Mul")?;
    (g.other_than(&g.nodes[m], std::f64::consts::FRAC_1_SQRT_2, 1e-4) == Some(x))
        .then(|| vec![m, e])
}

/// `Tanh(Mul(√(2/π), Add(x, Mul(0.044715, Pow(x, 3)))))`.
fn tanh_core(g: &Graph<'_>, tanh_out: &str, x: &str) -> Option<Vec<usize>> {
    let t = g.sole(tanh_out, "Tanh")?;
    let m1 = g.sole(g.nodes[t].input.first()?, "Mul")?;
    let sum = g.other_than(&g.nodes[m1], (2.0 / std::f64::consts::PI).sqrt(), 1e-4)?;
    let add = g.sole(sum, "Add")?;
    let an = &g.nodes[add];
    let cube_term = an.input.iter().find(|i| *i != x)?;
    if !an.input.iter().any(|i| i == x) {
        return None;
    }
    let m2 = g.sole(cube_term, "Mul")?;
    let cube = g.other_than(&g.nodes[m2], 0.044715, 1e-6)?;
    let p = g.sole(cube, "Pow")?;
    let [base, exponent] = g.nodes[p].input.as_slice() else {
        return None;
    };
    (base == x && g.consts.get(exponent.as_str()) == Some(&3.0)).then(|| vec![p, m2, add, m1, t])
}

/// `Div(x, [Expand](Clip|Max(ReduceL2|L1(x, keepdims=1), eps)))`.
fn normalize(g: &Graph<'_>, end: usize) -> Option<Rewrite> {
    let div = &g.nodes[end];
    if div.op_type() != "Div" || !normalize_domain(div.domain()).is_empty() || div.input.len() != 2
    {
        return None;
    }
    let x = &div.input[0];
    let mut drop = Vec::new();
    let mut denom = div.input[1].as_str();
    if let Some(e) = g.sole(denom, "Expand") {
        drop.push(e);
        denom = g.nodes[e].input.first()?;
    }
    let (clamp, eps) = if let Some(c) = g.sole(denom, "Clip") {
        let cn = &g.nodes[c];
        let eps = match cn.input.get(1) {
            Some(min) if !min.is_empty() => *g.consts.get(min.as_str())?,
            _ => cn
                .attribute
                .iter()
                .find(|a| a.name() == "min")
                .map(|a| a.f() as f64)?,
        };
        if cn.input.get(2).is_some_and(|m| !m.is_empty())
            || cn.attribute.iter().any(|a| a.name() == "max")
        {
            return None;
        }
        (c, eps)
    } else {
        let m = g.sole(denom, "Max")?;
        let mn = &g.nodes[m];
        let eps = mn
            .input
            .iter()
            .find_map(|i| g.consts.get(i.as_str()).copied())?;
        (m, eps)
    };
    drop.push(clamp);
    let norm_in = g.nodes[clamp]
        .input
        .iter()
        .find(|i| !g.consts.contains_key(i.as_str()))?;
    let r = g
        .sole(norm_in, "ReduceL2")
        .map(|r| (r, 2.0))
        .or_else(|| g.sole(norm_in, "ReduceL1").map(|r| (r, 1.0)))?;
    let (r, order): (usize, f32) = r;
    let rn = &g.nodes[r];
    if rn.input.first() != Some(x) {
        return None;
    }
    let keep = rn
        .attribute
        .iter()
        .find(|a| a.name() == "keepdims")
        .map_or(1, |a| a.i());
    let axes: Vec<i64> = match rn.attribute.iter().find(|a| a.name() == "axes") {
        Some(a) => a.ints.clone(),
        None => g.int_lists.get(rn.input.get(1)?.as_str())?.clone(),
    };
    if keep != 1 || axes.is_empty() {
        return None;
    }
    drop.push(r);
    Some(Rewrite {
        drop,
        last: end,
        node: NodeProto {
            input: vec![x.clone()],
            output: div.output.clone(),
            name: Some(format!("{}/normalize", div.name())),
            op_type: Some("NormalizePlugin".into()),
            domain: Some("torch_tensorrt".into()),
            attribute: vec![
                attr_float("order", order),
                attr_ints("axes", axes, AttributeType::Ints),
                attr_ints("keep_dims", vec![1], AttributeType::Int),
                attr_float("eps", eps as f32),
                attr_string("mode", "normalize"),
            ],
            ..NodeProto::default()
        },
    })
}
