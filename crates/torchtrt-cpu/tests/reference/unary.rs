//! Unary math in f64.

use torchtrt_core::layers::UnaryOp;

/// The error function by its Maclaurin series (|x| ≤ 3) or continued fraction for erfc.
pub fn erf(x: f64) -> f64 {
    if x.abs() > 3.0 {
        return x.signum() * (1.0 - erfc_cf(x.abs()));
    }
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..200 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
        if term.abs() < 1e-18 {
            break;
        }
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

/// erfc(x) for x > 3 by its continued fraction.
fn erfc_cf(x: f64) -> f64 {
    let mut f = 0.0;
    for k in (1..100).rev() {
        f = (k as f64 / 2.0) / (x + f);
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / (x + f)
}

/// The ONNX definition of `op` on one value.
pub fn apply(op: UnaryOp, x: f64) -> f64 {
    use UnaryOp as U;
    match op {
        U::Abs => x.abs(),
        U::Neg => -x,
        U::Exp => x.exp(),
        U::Log => x.ln(),
        U::Sqrt => x.sqrt(),
        U::Reciprocal => 1.0 / x,
        U::Floor => x.floor(),
        U::Ceil => x.ceil(),
        U::Round => {
            let r = x.round();
            if (x - x.trunc()).abs() == 0.5 {
                2.0 * (x / 2.0).round()
            } else {
                r
            }
        }
        U::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }
        U::Sin => x.sin(),
        U::Cos => x.cos(),
        U::Tan => x.tan(),
        U::Asin => x.asin(),
        U::Acos => x.acos(),
        U::Atan => x.atan(),
        U::Sinh => x.sinh(),
        U::Cosh => x.cosh(),
        U::Asinh => x.asinh(),
        U::Acosh => x.acosh(),
        U::Atanh => x.atanh(),
        U::Erf => erf(x),
        U::Not => {
            if x == 0.0 {
                1.0
            } else {
                0.0
            }
        }
    }
}
