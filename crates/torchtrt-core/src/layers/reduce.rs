//! Reductions over axes.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DimExpr;

use super::{InferInput, LayerOp, TypeShape, normalize_axis};

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

/// Reduces `axes` (all axes when empty), keeping them as size 1 when `keep_dims`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reduce {
    /// The reduction.
    pub op: ReduceOp,
    /// Axes, negative counting from the end; empty means all.
    pub axes: Vec<i64>,
    /// Keep reduced axes as size 1.
    pub keep_dims: bool,
}

impl Reduce {
    /// The sorted, de-duplicated axes for `rank`.
    pub fn resolved_axes(&self, rank: usize) -> Result<Vec<usize>, String> {
        let mut axes: Vec<usize> = if self.axes.is_empty() {
            (0..rank).collect()
        } else {
            self.axes
                .iter()
                .map(|&a| normalize_axis(a, rank))
                .collect::<Result<_, _>>()?
        };
        axes.sort_unstable();
        axes.dedup();
        Ok(axes)
    }
}

impl LayerOp for Reduce {
    fn kind(&self) -> &'static str {
        "Reduce"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if x.dtype == torchtrt_plugin_api::DType::Bool {
            return Err(format!("{:?} is not defined for bool", self.op));
        }
        let axes = self.resolved_axes(x.shape.len())?;
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
