//! Elementwise: arithmetic, comparisons and logic with broadcasting, floats and integers.

use proptest::prelude::*;
use proptest::sample::select;
use torchtrt_core::layers::{Elementwise, ElementwiseOp as E};
use torchtrt_core::plugin_api::DType;

use crate::reference::cast::cast;
use crate::reference::elementwise::{apply, binary};
use crate::support::{
    Rng, Tol, broadcast_pair, check, float_dtype, int_dtype, nd, pooled, random, random_signed,
    run, run_on,
};

const ARITH: [E; 8] = [
    E::Add,
    E::Sub,
    E::Mul,
    E::Div,
    E::Pow,
    E::Max,
    E::Min,
    E::Mod,
];
/// Arithmetic defined for floats only.
const FLOAT_ONLY: [E; 1] = [E::PRelu];
const COMPARE: [E; 5] = [
    E::Equal,
    E::Less,
    E::LessOrEqual,
    E::Greater,
    E::GreaterOrEqual,
];

/// Shift counts within the width, small enough that the shifted values stay within i64.
fn shift_counts(dtype: DType, shape: &[usize], rng: &mut Rng) -> torchtrt_core::Tensor {
    let bits = (8 * dtype.size()) as f64;
    random(dtype, shape, rng, 0.0, (bits - 8.0).max(7.0))
}

fn layer(op: E, fmod: bool) -> Elementwise {
    Elementwise { op, fmod }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn float_arithmetic(
        op in select([&ARITH[..], &FLOAT_ONLY[..]].concat()),
        dtype in float_dtype(),
        (sa, sb) in broadcast_pair(5),
        fmod: bool,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let (a, b) = match op {
            E::Pow => (random(dtype, &sa, &mut rng, 0.5, 2.0), random(dtype, &sb, &mut rng, -2.0, 2.0)),
            E::Div | E::Mod => (random(dtype, &sa, &mut rng, -4.0, 4.0), random_signed(dtype, &sb, &mut rng, 0.5, 2.0)),
            _ => (random(dtype, &sa, &mut rng, -3.0, 3.0), random(dtype, &sb, &mut rng, -3.0, 3.0)),
        };
        let got = run(layer(op, fmod), &[&a, &b])?;
        let want = binary(&nd(&a), &nd(&b), |x, y| apply(op, fmod, false, x, y));
        check(&got, &want, Tol::of(dtype).scaled(4.0))?;
    }

    #[test]
    fn integer_shifts(
        op in select(vec![E::ShiftLeft, E::ShiftRight]),
        dtype in int_dtype(),
        (sa, sb) in broadcast_pair(5),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let a = random_signed(dtype, &sa, &mut rng, 0.0, 120.0);
        let b = shift_counts(dtype, &sb, &mut rng);
        let got = run(layer(op, false), &[&a, &b])?;
        let want = binary(&nd(&a), &nd(&b), |x, y| cast(apply(op, false, true, x, y), DType::I64, dtype));
        check(&got, &want, Tol::of(dtype))?;
    }

    #[test]
    fn integer_arithmetic(
        op in select(ARITH.to_vec()),
        dtype in int_dtype(),
        (sa, sb) in broadcast_pair(5),
        fmod: bool,
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let (a, b) = match op {
            E::Pow => (random_signed(dtype, &sa, &mut rng, 0.0, 3.0), random(dtype, &sb, &mut rng, 0.0, 5.0)),
            E::Div | E::Mod => (random_signed(dtype, &sa, &mut rng, 0.0, 120.0), random_signed(dtype, &sb, &mut rng, 1.0, 9.0)),
            _ => (random_signed(dtype, &sa, &mut rng, 0.0, 120.0), random_signed(dtype, &sb, &mut rng, 0.0, 120.0)),
        };
        let got = run(layer(op, fmod), &[&a, &b])?;
        let want = binary(&nd(&a), &nd(&b), |x, y| cast(apply(op, fmod, true, x, y), DType::I64, dtype));
        check(&got, &want, Tol::of(dtype))?;
    }

    #[test]
    fn comparisons(
        op in select(COMPARE.to_vec()),
        dtype in prop_oneof![float_dtype(), int_dtype()],
        (sa, sb) in broadcast_pair(5),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let (lo, hi) = if dtype.is_unsigned() { (0.0, 4.0) } else { (-2.0, 2.0) };
        let small = |shape: &[usize], rng: &mut Rng| {
            let t = random(DType::I64, shape, rng, lo, hi);
            crate::support::from_f64(dtype, shape, &t.to_f64_vec())
        };
        let (a, b) = (small(&sa, &mut rng), small(&sb, &mut rng));
        let got = run(layer(op, false), &[&a, &b])?;
        prop_assert_eq!(got.dtype(), DType::Bool);
        let want = binary(&nd(&a), &nd(&b), |x, y| apply(op, false, false, x, y));
        check(&got, &want, Tol::of(DType::Bool))?;
    }

    #[test]
    fn logic(op in select(vec![E::And, E::Or, E::Xor]), (sa, sb) in broadcast_pair(5), seed: u64) {
        let mut rng = Rng::new(seed);
        let a = random(DType::Bool, &sa, &mut rng, 0.0, 1.0);
        let b = random(DType::Bool, &sb, &mut rng, 0.0, 1.0);
        let got = run(layer(op, false), &[&a, &b])?;
        let want = binary(&nd(&a), &nd(&b), |x, y| apply(op, false, false, x, y));
        check(&got, &want, Tol::of(DType::Bool))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Tensors large enough to be split into parallel chunks, on both backends.
    #[test]
    fn large_broadcasts_split_across_threads(
        rows in 100usize..300,
        cols in 100usize..300,
        scalar: bool,
        dtype in float_dtype(),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let a = random(dtype, &[rows, cols], &mut rng, -3.0, 3.0);
        let b_shape = if scalar { vec![] } else { vec![rows, 1] };
        let b = random(dtype, &b_shape, &mut rng, -3.0, 3.0);
        let want = binary(&nd(&a), &nd(&b), |x, y| x * y);
        check(&run(layer(E::Mul, false), &[&a, &b])?, &want, Tol::of(dtype))?;
        let got = run_on(pooled(), layer(E::Mul, false), &[&a, &b]).map_err(TestCaseError::fail)?;
        check(&got[0], &want, Tol::of(dtype))?;
    }

    /// A channels-last tensor with one row of channels per image (a squeeze-and-excitation
    /// scale): rows of the output read the tensor in place and repeat the image's row, on
    /// either side of the operation (`swap`: the first operand is the row) and across
    /// threads. Each side's values keep [`float_arithmetic`]'s ranges for its role, so
    /// `Pow` and `Div` stay finite in f16.
    #[test]
    fn repeated_rows_of_channels(
        op in select(ARITH.to_vec()),
        (n, positions, channels) in (1usize..3, 1usize..700, 1usize..40),
        swap: bool,
        dtype in float_dtype(),
        seed: u64,
    ) {
        let mut rng = Rng::new(seed);
        let (full, row) = (vec![n, positions, 1, channels], vec![n, 1, 1, channels]);
        let (sa, sb) = if swap { (&row, &full) } else { (&full, &row) };
        let (a, b) = match op {
            E::Pow => (random(dtype, sa, &mut rng, 0.5, 2.0), random(dtype, sb, &mut rng, -2.0, 2.0)),
            E::Div | E::Mod => (random(dtype, sa, &mut rng, -4.0, 4.0), random_signed(dtype, sb, &mut rng, 0.5, 2.0)),
            _ => (random(dtype, sa, &mut rng, -3.0, 3.0), random(dtype, sb, &mut rng, -3.0, 3.0)),
        };
        let (a, b) = (&a, &b);
        let want = binary(&nd(a), &nd(b), |x, y| apply(op, false, false, x, y));
        check(&run(layer(op, false), &[a, b])?, &want, Tol::of(dtype).scaled(4.0))?;
        let got = run_on(pooled(), layer(op, false), &[a, b]).map_err(TestCaseError::fail)?;
        check(&got[0], &want, Tol::of(dtype).scaled(4.0))?;
    }
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let a = crate::support::from_f64(DType::I32, &[3], &[1.0, 2.0, 3.0]);
    let b = crate::support::from_f64(DType::I32, &[3], &[1.0, 0.0, 3.0]);
    let err = run_on(crate::support::global(), layer(E::Div, false), &[&a, &b]).unwrap_err();
    assert!(
        err.contains("division by zero") && err.contains("element 1"),
        "{err}"
    );
}

#[test]
fn mismatched_runtime_shapes_are_an_error() {
    let a = crate::support::from_f64(DType::F32, &[2, 3], &[1.0; 6]);
    let b = crate::support::from_f64(DType::F32, &[3], &[1.0; 3]);
    let bad = crate::support::from_f64(DType::F32, &[4], &[1.0; 4]);
    let backend = crate::support::global();
    let shapes = [
        torchtrt_core::plugin_api::const_shape(&[2, 3]),
        torchtrt_core::plugin_api::const_shape(&[3]),
    ];
    let infer: Vec<_> = [&a, &b]
        .iter()
        .zip(&shapes)
        .map(|(t, s)| torchtrt_core::InferInput {
            dtype: t.dtype(),
            shape: s,
            value: None,
        })
        .collect();
    let kernel =
        torchtrt_core::Backend::prepare(backend, &layer(E::Add, false).into(), &infer).unwrap();
    let mut out = vec![torchtrt_core::Tensor::zeros(DType::F32, &[2, 3])];
    let err = kernel.execute(&[&a, &bad], &mut out).unwrap_err();
    assert!(err.contains("broadcast"), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The constant exponents computed without `powf` (2, 1/2, 3/4) match it, zeros,
    /// infinities and negative bases included.
    #[test]
    fn pow_by_special_constants(exponent in select(vec![2.0, 0.5, 0.75]), dtype in float_dtype(), n in 1usize..300, seed: u64) {
        let mut rng = Rng::new(seed);
        let mut values: Vec<f64> = (0..n).map(|_| rng.uniform(0.0, 40.0)).collect();
        values.extend([0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, -1.5]);
        let a = crate::support::from_f64(dtype, &[values.len()], &values);
        let b = crate::support::from_f64(dtype, &[], &[exponent]);
        let got = run(layer(E::Pow, false), &[&a, &b])?;
        let want = binary(&nd(&a), &nd(&b), f64::powf);
        check(&got, &want, Tol::of(dtype).scaled(2.0))?;
    }
}

/// Shift counts that are negative or at least the width: 0, or −1 for a right shift of a
/// negative value.
#[test]
fn out_of_range_shifts_saturate() {
    use torchtrt_core::Tensor;
    let a = Tensor::from_vec(&[4], vec![-8i8, 4, -1, 100]).expect("tensor");
    let b = Tensor::from_vec(&[4], vec![8i8, 9, -1, 127]).expect("tensor");
    let left = run(layer(E::ShiftLeft, false), &[&a, &b]).expect("runs");
    assert_eq!(left.as_slice::<i8>().expect("i8"), &[0, 0, 0, 0]);
    let right = run(layer(E::ShiftRight, false), &[&a, &b]).expect("runs");
    assert_eq!(right.as_slice::<i8>().expect("i8"), &[-1, 0, -1, 0]);
    let a = Tensor::from_vec(&[3], vec![64i8, 1, -64]).expect("tensor");
    let b = Tensor::from_vec(&[3], vec![1i8, 7, 1]).expect("tensor");
    let wrapped = run(layer(E::ShiftLeft, false), &[&a, &b]).expect("runs");
    assert_eq!(wrapped.as_slice::<i8>().expect("i8"), &[-128, -128, -128]);
    let f = Tensor::from_vec(&[1], vec![1f32]).expect("tensor");
    assert!(run(layer(E::ShiftLeft, false), &[&f, &f]).is_err());
}

/// u64 values past `i64::MAX`: right shifts are logical, comparisons and min/max unsigned,
/// sums wrap at 2^64, and casts to f32 and i64 follow the ONNX rules.
#[test]
fn wide_unsigned_values_keep_their_high_bit() {
    use torchtrt_core::Tensor;
    use torchtrt_core::layers::Cast;
    let top = 1u64 << 63;
    let a = Tensor::from_vec(&[3], vec![top, u64::MAX, top + 5]).expect("tensor");
    let b = Tensor::from_vec(&[3], vec![1u64, 2, 7]).expect("tensor");
    let right = run(layer(E::ShiftRight, false), &[&a, &b]).expect("runs");
    assert_eq!(
        right.as_slice::<u64>().expect("u64"),
        &[top >> 1, u64::MAX >> 2, (top + 5) >> 7]
    );
    let sum = run(layer(E::Add, false), &[&a, &b]).expect("runs");
    assert_eq!(sum.as_slice::<u64>().expect("u64"), &[top + 1, 1, top + 12]);
    let greater = run(layer(E::Greater, false), &[&a, &b]).expect("runs");
    assert_eq!(greater.bytes(), &[1, 1, 1]);
    let min = run(layer(E::Min, false), &[&a, &b]).expect("runs");
    assert_eq!(min.as_slice::<u64>().expect("u64"), &[1, 2, 7]);
    let as_f32 = run(Cast { to: DType::F32 }, &[&a]).expect("runs");
    assert_eq!(as_f32.as_slice::<f32>().expect("f32")[1], u64::MAX as f32);
    let as_i64 = run(Cast { to: DType::I64 }, &[&a]).expect("runs");
    assert_eq!(as_i64.as_slice::<i64>().expect("i64")[0], i64::MIN);
    let back = run(Cast { to: DType::U64 }, &[&as_i64]).expect("runs");
    assert_eq!(
        back.as_slice::<u64>().expect("u64"),
        a.as_slice::<u64>().expect("u64")
    );
}
