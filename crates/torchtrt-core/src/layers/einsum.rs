//! Einstein summation over any number of inputs.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DType, DimExpr, format_shape};

use super::{InferInput, LayerOp, TypeShape, broadcast_shapes};

/// Einstein summation (ONNX / numpy `Einsum`): `equation` is `"ij,jk->ik"`-style, one
/// comma-separated term per input, letters `a-z`/`A-Z` as labels, optional spaces.
///
/// A label repeated within one term takes the diagonal; labels missing from the output are
/// summed over. `...` stands for the dims not named by letters; these broadcast across
/// inputs (numpy rules) and must appear in an explicit output when they cover any dim.
/// Without `->` the output is the ellipsis dims followed by the labels used exactly once,
/// in alphabetical (ASCII) order. Every input shares one numeric dtype; floats accumulate in
/// f32 (f64 for f64), integers wrap.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Einsum {
    /// The equation.
    pub equation: String,
}

/// An equation resolved against input ranks: every dim of every input and of the output is
/// named by a label id. Ids `0..ellipsis` are the ellipsis dims (outermost first), the rest
/// the letters in order of first use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumPlan {
    /// Number of distinct labels.
    pub labels: usize,
    /// Number of dims the ellipsis stands for (the most any input gives it).
    pub ellipsis: usize,
    /// Per input, the label of each dim.
    pub inputs: Vec<Vec<usize>>,
    /// The label of each output dim.
    pub output: Vec<usize>,
}

/// One term: its letters before and after the ellipsis, and whether it has one.
#[derive(Default)]
struct Term {
    head: Vec<u8>,
    tail: Vec<u8>,
    ellipsis: bool,
}

impl Term {
    fn parse(text: &str) -> Result<Term, String> {
        let mut term = Term::default();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix("...") {
                if term.ellipsis {
                    return Err(format!("term `{text}` has more than one `...`"));
                }
                term.ellipsis = true;
                rest = after;
                continue;
            }
            if !c.is_ascii_alphabetic() {
                return Err(format!("term `{text}` has the invalid character `{c}`"));
            }
            let side = if term.ellipsis {
                &mut term.tail
            } else {
                &mut term.head
            };
            side.push(c as u8);
            rest = &rest[1..];
        }
        Ok(term)
    }

    fn letters(&self) -> impl Iterator<Item = u8> + '_ {
        self.head.iter().chain(&self.tail).copied()
    }

    fn named(&self) -> usize {
        self.head.len() + self.tail.len()
    }
}

impl Einsum {
    /// Resolves the equation for inputs of these ranks.
    pub fn plan(&self, ranks: &[usize]) -> Result<EinsumPlan, String> {
        let eq: String = self
            .equation
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let terms: Vec<Term> = lhs.split(',').map(Term::parse).collect::<Result<_, _>>()?;
        if terms.len() != ranks.len() {
            return Err(format!(
                "equation `{}` has {} input terms for {} inputs",
                self.equation,
                terms.len(),
                ranks.len()
            ));
        }
        let mut ellipsis = 0;
        for (i, (t, &r)) in terms.iter().zip(ranks).enumerate() {
            match r.checked_sub(t.named()) {
                Some(e) if t.ellipsis => ellipsis = ellipsis.max(e),
                Some(0) => {}
                _ => {
                    return Err(format!(
                        "input {i} has rank {r} but its term names {} dims",
                        t.named()
                    ));
                }
            }
        }
        let mut letters: Vec<u8> = Vec::new();
        for c in terms.iter().flat_map(Term::letters) {
            if !letters.contains(&c) {
                letters.push(c);
            }
        }
        let id = |c: u8| ellipsis + letters.iter().position(|&l| l == c).unwrap_or(0);
        let dims = |t: &Term, e: usize| -> Vec<usize> {
            let mut v: Vec<usize> = t.head.iter().map(|&c| id(c)).collect();
            v.extend(ellipsis - e..ellipsis);
            v.extend(t.tail.iter().map(|&c| id(c)));
            v
        };
        let inputs = terms
            .iter()
            .zip(ranks)
            .map(|(t, &r)| dims(t, r - t.named()))
            .collect();
        let output = match rhs {
            Some(r) => {
                let out = Term::parse(r)?;
                let mut seen = Vec::new();
                for c in out.letters() {
                    if seen.contains(&c) {
                        return Err(format!("output label `{}` repeats", c as char));
                    }
                    if !letters.contains(&c) {
                        return Err(format!("output label `{}` is in no input", c as char));
                    }
                    seen.push(c);
                }
                if !out.ellipsis && ellipsis > 0 {
                    return Err(format!(
                        "the inputs' `...` covers {ellipsis} dims but the output has no `...`"
                    ));
                }
                dims(&out, if out.ellipsis { ellipsis } else { 0 })
            }
            None => {
                let mut once: Vec<u8> = letters
                    .iter()
                    .copied()
                    .filter(|&c| {
                        terms
                            .iter()
                            .flat_map(Term::letters)
                            .filter(|&l| l == c)
                            .count()
                            == 1
                    })
                    .collect();
                once.sort_unstable();
                (0..ellipsis).chain(once.into_iter().map(id)).collect()
            }
        };
        Ok(EinsumPlan {
            labels: ellipsis + letters.len(),
            ellipsis,
            inputs,
            output,
        })
    }
}

impl EinsumPlan {
    /// The extent of each label: ellipsis dims broadcast (numpy), letters must agree.
    pub fn label_dims(&self, shapes: &[&[DimExpr]]) -> Result<Vec<DimExpr>, String> {
        let mut dims: Vec<Option<DimExpr>> = vec![None; self.labels];
        let mut ell: Vec<DimExpr> = Vec::new();
        for (labels, shape) in self.inputs.iter().zip(shapes) {
            let own: Vec<DimExpr> = labels
                .iter()
                .zip(shape.iter())
                .filter(|(l, _)| **l < self.ellipsis)
                .map(|(_, d)| d.clone())
                .collect();
            ell = broadcast_shapes(&ell, &own)?;
            for (&l, d) in labels.iter().zip(shape.iter()) {
                if l < self.ellipsis {
                    continue;
                }
                match &dims[l] {
                    None => dims[l] = Some(d.clone()),
                    Some(prev) => match (prev.as_const(), d.as_const()) {
                        (Some(a), Some(b)) if a != b => {
                            return Err(format!(
                                "a label is {a} in one place and {b} in another (shape {})",
                                format_shape(shape)
                            ));
                        }
                        (None, Some(_)) => dims[l] = Some(d.clone()),
                        _ => {}
                    },
                }
            }
        }
        Ok(ell
            .into_iter()
            .chain(
                dims[self.ellipsis..]
                    .iter()
                    .map(|d| d.clone().unwrap_or(DimExpr::Const(1))),
            )
            .collect())
    }
}

impl LayerOp for Einsum {
    fn kind(&self) -> &'static str {
        "Einsum"
    }
    fn arity(&self) -> (usize, usize) {
        (1, usize::MAX)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let dtype = inputs[0].dtype;
        if dtype == DType::Bool || inputs.iter().any(|i| i.dtype != dtype) {
            return Err("Einsum inputs must share one numeric dtype".into());
        }
        let ranks: Vec<usize> = inputs.iter().map(|i| i.shape.len()).collect();
        let plan = self.plan(&ranks)?;
        let shapes: Vec<&[DimExpr]> = inputs.iter().map(|i| i.shape).collect();
        let dims = plan.label_dims(&shapes)?;
        let shape = plan.output.iter().map(|&l| dims[l].clone()).collect();
        Ok(vec![TypeShape::new(dtype, shape)])
    }
}
