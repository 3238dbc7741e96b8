//! The comparison and the sentinel on core tensors.

use torchtrt_core::Tensor;
use torchtrt_core::plugin_api::DType;

use crate::compare::{Mismatch, Tol, check_exact, check_floats};
use crate::sentinel;

impl Tol {
    /// The usual bound for results of `dtype` (integers and bools: exact).
    pub fn of(dtype: DType) -> Tol {
        match dtype {
            DType::F64 => Tol::f64(),
            DType::F32 => Tol::f32(),
            DType::F16 => Tol::f16(),
            DType::BF16 => Tol::bf16(),
            _ => Tol::EXACT,
        }
    }
}

/// Checks `got` against `want`: same dtype and shape; floats within `tol`, integers
/// exactly as i64, bools byte for byte (a byte other than 0 or 1 is not a bool).
pub fn check_tensor(got: &Tensor, want: &Tensor, tol: Tol) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "got {} {:?}, want {} {:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    let result = match want.dtype() {
        DType::Bool => check_exact(got.bytes(), want.bytes()),
        d if d.is_float() => check_floats(&got.to_f64_vec(), &want.to_f64_vec(), tol),
        _ => match (got.to_i64_vec(), want.to_i64_vec()) {
            (Some(g), Some(w)) => check_exact(&g, &w),
            _ => check_exact(got.bytes(), want.bytes()),
        },
    };
    result.map_err(|m: Mismatch| format!("{} {}", want.dtype(), m.in_shape(want.shape())))
}

/// Fills `t` with the sentinel of its dtype.
pub fn fill_sentinel(t: &mut Tensor) {
    let b = sentinel::byte(t.dtype().is_float());
    t.bytes_mut().fill(b);
}

/// A tensor of `dtype` and `shape` holding the sentinel.
pub fn sentinel_tensor(dtype: DType, shape: &[usize]) -> Tensor {
    let mut t = Tensor::zeros(dtype, shape);
    fill_sentinel(&mut t);
    t
}

/// A tensor of `t`'s dtype and shape holding the sentinel.
pub fn sentinel_like(t: &Tensor) -> Tensor {
    sentinel_tensor(t.dtype(), t.shape())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritten_output_fails_against_any_reference() {
        for dtype in [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::F64,
            DType::I64,
            DType::I32,
            DType::Bool,
        ] {
            let want = Tensor::zeros(dtype, &[3]);
            let got = sentinel_like(&want);
            assert!(
                check_tensor(&got, &want, Tol::new(1.0, 1.0)).is_err(),
                "{dtype}"
            );
        }
    }

    #[test]
    fn bools_must_be_zero_or_one() {
        let want = Tensor::from_bytes(DType::Bool, &[2], &[1, 0]).unwrap();
        let got = Tensor::from_bytes(DType::Bool, &[2], &[2, 0]).unwrap();
        assert!(check_tensor(&got, &want, Tol::EXACT).is_err());
    }

    #[test]
    fn int64_compares_without_f64() {
        let a = Tensor::from_vec(&[1], vec![(1i64 << 60) + 1]).unwrap();
        let b = Tensor::from_vec(&[1], vec![1i64 << 60]).unwrap();
        assert!(check_tensor(&a, &b, Tol::f32()).is_err());
    }
}
