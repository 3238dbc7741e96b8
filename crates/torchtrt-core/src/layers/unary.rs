//! Unary element-wise math.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerOp, TypeShape};

/// A unary function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `|x|`
    Abs,
    /// `-x`
    Neg,
    /// `e^x`
    Exp,
    /// `ln x`
    Log,
    /// `√x`
    Sqrt,
    /// `1/x`
    Reciprocal,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
    /// Round half to even.
    Round,
    /// −1, 0 or 1.
    Sign,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Tangent.
    Tan,
    /// Arc sine.
    Asin,
    /// Arc cosine.
    Acos,
    /// Arc tangent.
    Atan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine.
    Acosh,
    /// Inverse hyperbolic tangent.
    Atanh,
    /// Error function.
    Erf,
    /// Logical not (bool).
    Not,
}

impl UnaryOp {
    /// Whether the op is defined for `dtype`.
    pub fn accepts(self, dtype: DType) -> bool {
        match self {
            UnaryOp::Not => dtype == DType::Bool,
            UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sign => dtype.is_float() || dtype.is_integer(),
            _ => dtype.is_float(),
        }
    }
}

/// Applies a unary function element-wise; output dtype = input dtype.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unary {
    /// The function.
    pub op: UnaryOp,
}

impl LayerOp for Unary {
    fn kind(&self) -> &'static str {
        "Unary"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        if !self.op.accepts(x.dtype) {
            return Err(format!("{:?} is not defined for {}", self.op, x.dtype));
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
