//! Activation functions.

use serde::{Deserialize, Serialize};

use super::{InferInput, LayerOp, TypeShape};

/// An activation function and its parameters (ONNX definitions).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum ActivationKind {
    /// `max(x, 0)`
    Relu,
    /// `x < 0 ? alpha·x : x`
    LeakyRelu {
        /// Negative slope.
        alpha: f32,
    },
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `tanh x`
    Tanh,
    /// `x < 0 ? alpha·(e^x − 1) : x`
    Elu {
        /// Scale of the negative part.
        alpha: f32,
    },
    /// `gamma·(x ≤ 0 ? alpha·(e^x − 1) : x)`
    Selu {
        /// Scale of the negative part.
        alpha: f32,
        /// Overall scale.
        gamma: f32,
    },
    /// `max(0, x) + min(0, alpha·(e^(x/alpha) − 1))`
    Celu {
        /// Shape parameter.
        alpha: f32,
    },
    /// `ln(1 + e^x)`
    Softplus,
    /// `x / (1 + |x|)`
    Softsign,
    /// `max(0, min(1, alpha·x + beta))`
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// `x · max(0, min(1, x/6 + 1/2))`
    HardSwish,
    /// `min(max(x, min), max)`
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// GELU, erf form or (`tanh`) the tanh approximation.
    Gelu {
        /// Use the tanh approximation.
        tanh: bool,
    },
    /// `x · tanh(softplus(x))`
    Mish,
    /// `x > alpha ? x : 0`
    ThresholdedRelu {
        /// Threshold.
        alpha: f32,
    },
    /// SiLU (swish): `x · sigmoid(x)`; the builder fuses `Mul(x, Sigmoid(x))` into it.
    Silu,
}

/// Applies an activation element-wise to a floating-point tensor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Activation {
    /// The function.
    pub kind: ActivationKind,
}

impl LayerOp for Activation {
    fn kind(&self) -> &'static str {
        "Activation"
    }
    fn arity(&self) -> (usize, usize) {
        (1, 1)
    }
    fn infer(&self, inputs: &[InferInput<'_>]) -> Result<Vec<TypeShape>, String> {
        let x = &inputs[0];
        let int_ok = matches!(
            self.kind,
            ActivationKind::Relu | ActivationKind::Clip { .. }
        );
        if !(x.dtype.is_float() || (int_ok && x.dtype.is_integer())) {
            return Err(format!("{:?} is not defined for {}", self.kind, x.dtype));
        }
        Ok(vec![TypeShape::new(x.dtype, x.shape.to_vec())])
    }
}
