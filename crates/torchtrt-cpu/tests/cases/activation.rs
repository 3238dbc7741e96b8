//! Activation: every kind on floats, Relu and Clip on integers.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::{Activation, ActivationKind as A};

use crate::reference::activation::apply;
use crate::support::{Rng, Tol, check, float_dtype, int_dtype, nd, random, run, shape};

fn kinds() -> Vec<A> {
    vec![
        A::Relu,
        A::LeakyRelu { alpha: 0.1 },
        A::Sigmoid,
        A::Tanh,
        A::Elu { alpha: 0.7 },
        A::Selu {
            alpha: 1.673_263_2,
            gamma: 1.050_701,
        },
        A::Celu { alpha: 1.3 },
        A::Softplus,
        A::Softsign,
        A::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        A::HardSwish,
        A::Clip {
            min: -1.25,
            max: 2.5,
        },
        A::Gelu { tanh: false },
        A::Gelu { tanh: true },
        A::Mish,
        A::ThresholdedRelu { alpha: 0.75 },
        A::Silu,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn float_activations(kind in select(kinds()), dtype in float_dtype(), shape in shape(4, 6), seed: u64) {
        let x = random(dtype, &shape, &mut Rng::new(seed), -4.0, 4.0);
        let got = run(Activation { kind }, &[&x])?;
        check(&got, &nd(&x).map(|v| apply(kind, v)), Tol::of(dtype))?;
    }

    #[test]
    fn integer_relu_and_clip(
        kind in select(vec![A::Relu, A::Clip { min: -7.5, max: 20.25 }, A::Clip { min: 3.0, max: 90.0 }]),
        dtype in int_dtype(),
        shape in shape(4, 6),
        seed: u64,
    ) {
        let (lo, hi) = if dtype.is_unsigned() { (0.0, 255.0) } else { (-100.0, 100.0) };
        let x = random(dtype, &shape, &mut Rng::new(seed), lo, hi);
        let got = run(Activation { kind }, &[&x])?;
        let want = nd(&x).map(|v| match kind {
            A::Clip { min, max } => v.max((min as f64).ceil()).min((max as f64).floor()),
            _ => v.max(0.0),
        });
        check(&got, &want, Tol::of(dtype))?;
    }
}
