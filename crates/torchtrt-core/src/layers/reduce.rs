//! Reductions over axes.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::{DimExpr, format_shape};

use super::value_input::{input_vector, known_len};
use super::{InferInput, LayerOp, TypeShape, normalize_axis, unknown_dim};

/// A reduction (ONNX `Reduce*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReduceOp {
    /// Σx
    Sum,
    /// Σx / n
    Mean,
    /// max x
    Max,
    /// min x
    Min,
    /// Πx
    Prod,
    /// Σ|x|
    L1,
    /// √Σx²
    L2,
    /// Σx²
    SumSquare,
    /// ln Σeˣ
    LogSumExp,
}

/// Reduces `axes` (all axes when empty), keeping them as size 1 when `keep_dims`. An
/// optional second input, a 1-D integer tensor (ONNX `axes` input), gives the axes instead
/// of the field, known at build time or only at run time; empty, it reduces every axis.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reduce {
    /// The reduction.
    pub op: ReduceOp,
    /// Axes, negative counting from the end; empty means all.
    pub axes: Vec<i64>,
    /// Keep reduced axes as size 1.
    pub keep_dims: bool,
}

const AXES: &str = "the axes input of Reduce";

impl Reduce {
    /// The sorted, de-duplicated axes of the field for `rank`.
    pub fn resolved_axes(&self, rank: usize) -> Result<Vec<usize>, String> {
        Reduce::resolve_axes(&self.axes, rank)
    }

    /// `axes` sorted and de-duplicated for `rank`; every axis when `axes` is empty.
    pub fn resolve_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
        let mut axes: Vec<usize> = if axes.is_empty() {
            (0..rank).collect()
        } else {
            axes.iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<Result<_, _>>()?
        };
        axes.sort_unstable();
        axes.dedup();
        Ok(axes)
    }

    /// The output when the axes input is known only at run time: with `keep_dims` every dim
    /// may become 1; without, the rank drops by the axes' (build-time) count.
    fn infer_unknown_axes(
        &self,
        x: &InferInput<'_>,
        axes: &InferInput<'_>,
    ) -> Result<Vec<TypeShape>, String> {
        let n = known_len(AXES, axes)?;
        let rank = x.shape.len();
        let shape = match (self.keep_dims, n) {
            (true, 0) => vec![DimExpr::Const(1); rank],
            (false, 0) => Vec::new(),
            (true, _) => x
                .shape
                .iter()
                .map(|d| {
                    if d.as_const() == Some(1) {
                        d.clone()
                    } else {
                        unknown_dim()
                    }
                })
                .collect(),
            (false, n) => {
                let kept = rank.checked_sub(n).ok_or_else(|| {
                    format!(
                        "{AXES} lists {n} axes, more than {} has",
                        format_shape(x.shape)
                    )
                })?;
                vec![unknown_dim(); kept]
            }
        };
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}

impl LayerOp for Reduce {
    fn kind(&self) -> &'static str {
        "Reduce"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 2)
    }
    fn value_inputs(&self) -> &'static [usize] {
        &[1]
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if x.dtype == torchtrt_plugin_api::DType::Bool {
            return Err(format!("{:?} is not defined for bool", self.op));
        }
        let axes = match inputs.get(1) {
            None => self.resolved_axes(x.shape.len())?,
            Some(a) => match input_vector(AXES, a)? {
                Some(axes) => {
                    let resolved = Reduce::resolve_axes(&axes, x.shape.len())?;
                    if resolved.len() != axes.len() && !axes.is_empty() {
                        return Err(format!("{AXES} repeats an axis: {axes:?}"));
                    }
                    resolved
                }
                None => return self.infer_unknown_axes(x, a),
            },
        };
        let shape = x
            .shape
            .iter()
            .enumerate()
            .filter_map(|(i, d)| match (axes.contains(&i), self.keep_dims) {
                (false, _) => Some(d.clone()),
                (true, true) => Some(DimExpr::Const(1)),
                (true, false) => None,
            })
            .collect();
        Ok(vec![TypeShape::new(x.dtype, shape)])
    }
}
