//! Binary element-wise operations with numpy broadcasting.

use serde::{Deserialize, Serialize};
use torchtrt_plugin_api::DType;

use super::{InferInput, LayerOp, TypeShape, broadcast_shapes};

/// A binary operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElementwiseOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (integer division truncates toward zero)
    Div,
    /// `a ^ b`
    Pow,
    /// `max(a, b)`
    Max,
    /// `min(a, b)`
    Min,
    /// Remainder with the sign of the divisor for integers (`fmod` sign of dividend for floats
    /// when `fmod` is set on the layer).
    Mod,
    /// Logical and (bool).
    And,
    /// Logical or (bool).
    Or,
    /// Logical xor (bool).
    Xor,
    /// `a == b` → bool
    Equal,
    /// `a < b` → bool
    Less,
    /// `a <= b` → bool
    LessOrEqual,
    /// `a > b` → bool
    Greater,
    /// `a >= b` → bool
    GreaterOrEqual,
    /// `a < 0 ? b · a : a` with `b` the slope (ONNX `PRelu`; floats only).
    PRelu,
    /// `a << b` on integers, bits past the width dropped; 0 when `b` is negative or at
    /// least the width (ONNX `BitShift`).
    ShiftLeft,
    /// `a >> b` on integers, arithmetic for signed types; when `b` is negative or at least
    /// the width, −1 for negative `a` and 0 otherwise (ONNX `BitShift`).
    ShiftRight,
}

impl ElementwiseOp {
    /// True for the comparisons, whose output is bool.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            ElementwiseOp::Equal
                | ElementwiseOp::Less
                | ElementwiseOp::LessOrEqual
                | ElementwiseOp::Greater
                | ElementwiseOp::GreaterOrEqual
        )
    }

    /// True for the bit shifts, which take integers.
    pub fn is_shift(self) -> bool {
        matches!(self, ElementwiseOp::ShiftLeft | ElementwiseOp::ShiftRight)
    }

    /// True for the logical operations, which take bools.
    pub fn is_logical(self) -> bool {
        matches!(
            self,
            ElementwiseOp::And | ElementwiseOp::Or | ElementwiseOp::Xor
        )
    }
}

/// Applies `op` to two tensors of the same dtype, broadcasting their shapes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Elementwise {
    /// The operation.
    pub op: ElementwiseOp,
    /// For `Mod` on floats: C `fmod` semantics (sign of the dividend) instead of Python's.
    pub fmod: bool,
}

impl Elementwise {
    /// An element-wise layer.
    pub fn new(op: ElementwiseOp) -> Elementwise {
        Elementwise { op, fmod: false }
    }
}

impl LayerOp for Elementwise {
    fn kind(&self) -> &'static str {
        "Elementwise"
    }
    fn arity(&self) -> (usize, usize) {
        (2, 2)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.dtype != b.dtype {
            return Err(format!(
                "{:?} needs equal dtypes, got {} and {}",
                self.op, a.dtype, b.dtype
            ));
        }
        if self.op.is_logical() != (a.dtype == DType::Bool) {
            return Err(format!("{:?} is not defined for {}", self.op, a.dtype));
        }
        if self.op.is_shift() && !a.dtype.is_integer() {
            return Err(format!("{:?} needs integers, got {}", self.op, a.dtype));
        }
        if self.op == ElementwiseOp::PRelu && !a.dtype.is_float() {
            return Err(format!(
                "PRelu needs a floating-point input, got {}",
                a.dtype
            ));
        }
        let shape = broadcast_shapes(a.shape, b.shape)?;
        let dtype = if self.op.is_comparison() {
            DType::Bool
        } else {
            a.dtype
        };
        Ok(vec![TypeShape::new(dtype, shape)])
    }
}
