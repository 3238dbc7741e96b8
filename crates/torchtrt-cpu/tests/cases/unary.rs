//! Unary: every function on floats over its domain; Abs/Neg/Sign on integers; Not on bools.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::{Unary, UnaryOp as U};
use torchtrt_core::plugin_api::DType;

use crate::reference::cast::cast;
use crate::reference::unary::apply;
use crate::support::{
    Rng, Tol, check, float_dtype, from_f64, int_dtype, nd, random, random_signed, run, shape,
};

const FLOAT_OPS: [U; 22] = [
    U::Abs,
    U::Neg,
    U::Exp,
    U::Log,
    U::Sqrt,
    U::Reciprocal,
    U::Floor,
    U::Ceil,
    U::Round,
    U::Sign,
    U::Sin,
    U::Cos,
    U::Tan,
    U::Asin,
    U::Acos,
    U::Atan,
    U::Sinh,
    U::Cosh,
    U::Asinh,
    U::Acosh,
    U::Atanh,
    U::Erf,
];

/// Inputs inside the function's domain and away from its poles.
fn domain(op: U) -> (f64, f64, bool) {
    match op {
        U::Log | U::Sqrt => (0.1, 4.0, false),
        U::Reciprocal => (0.25, 4.0, true),
        U::Asin | U::Acos | U::Atanh => (-0.9, 0.9, false),
        U::Acosh => (1.1, 4.0, false),
        U::Tan => (-1.2, 1.2, false),
        _ => (-3.0, 3.0, false),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn float_functions(op in select(FLOAT_OPS.to_vec()), dtype in float_dtype(), shape in shape(4, 6), seed: u64) {
        let mut rng = Rng::new(seed);
        let (lo, hi, signed) = domain(op);
        let x = if matches!(op, U::Round | U::Floor | U::Ceil) {
            let quarters = random(DType::I64, &shape, &mut rng, -12.0, 12.0).to_f64_vec();
            from_f64(dtype, &shape, &quarters.iter().map(|q| q / 4.0 + 0.01 * rng.uniform(-1.0, 1.0).round()).collect::<Vec<_>>())
        } else if signed {
            random_signed(dtype, &shape, &mut rng, lo, hi)
        } else {
            random(dtype, &shape, &mut rng, lo, hi)
        };
        let got = run(Unary { op }, &[&x])?;
        check(&got, &nd(&x).map(|v| apply(op, v)), Tol::of(dtype))?;
    }

    #[test]
    fn integer_functions(op in select(vec![U::Abs, U::Neg, U::Sign]), dtype in int_dtype(), shape in shape(4, 6), seed: u64) {
        let mut rng = Rng::new(seed);
        let (lo, hi) = if dtype.is_unsigned() { (0.0, 255.0) } else { (-100.0, 100.0) };
        let x = random(dtype, &shape, &mut rng, lo, hi);
        let got = run(Unary { op }, &[&x])?;
        check(&got, &nd(&x).map(|v| cast(apply(op, v), DType::I64, dtype)), Tol::of(dtype))?;
    }

    #[test]
    fn logical_not(shape in shape(4, 6), seed: u64) {
        let x = random(DType::Bool, &shape, &mut Rng::new(seed), 0.0, 1.0);
        let got = run(Unary { op: U::Not }, &[&x])?;
        check(&got, &nd(&x).map(|v| apply(U::Not, v)), Tol::of(DType::Bool))?;
    }
}

#[test]
fn round_is_half_to_even() {
    let x = from_f64(DType::F32, &[6], &[0.5, 1.5, 2.5, -0.5, -1.5, -2.5]);
    let got = run(Unary { op: U::Round }, &[&x]).unwrap();
    assert_eq!(got.to_f64_vec(), [0.0, 2.0, 2.0, -0.0, -2.0, -2.0]);
}
