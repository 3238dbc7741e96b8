//! Activation functions in f64, straight from their ONNX formulas.

use torchtrt_core::layers::ActivationKind;

use super::unary::erf;

/// The activation of one value.
pub fn apply(kind: ActivationKind, x: f64) -> f64 {
    use ActivationKind as A;
    let softplus = |x: f64| (1.0 + x.exp()).ln();
    match kind {
        A::Relu => x.max(0.0),
        A::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        A::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        A::Tanh => x.tanh(),
        A::Elu { alpha } => {
            if x < 0.0 {
                alpha as f64 * (x.exp() - 1.0)
            } else {
                x
            }
        }
        A::Selu { alpha, gamma } => {
            gamma as f64
                * if x <= 0.0 {
                    alpha as f64 * (x.exp() - 1.0)
                } else {
                    x
                }
        }
        A::Celu { alpha } => {
            let a = alpha as f64;
            x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0)
        }
        A::Softplus => softplus(x),
        A::Softsign => x / (1.0 + x.abs()),
        A::HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
        A::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        A::Clip { min, max } => x.max(min as f64).min(max as f64),
        A::Gelu { tanh: false } => 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
        A::Gelu { tanh: true } => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (k * (x + 0.044715 * x.powi(3))).tanh())
        }
        A::Mish => x * softplus(x).tanh(),
        A::Silu => x / (1.0 + (-x).exp()),
        A::ThresholdedRelu { alpha } => {
            if x > alpha as f64 {
                x
            } else {
                0.0
            }
        }
    }
}
