//! Rows of f32, f16 or bf16 elements widened to `f32` for computation and narrowed back,
//! with the crate's vectorisable conversions; `f32` rows are used in place.

use torchtrt_plugin_api::DType;

use crate::kernels::float::Float;
use crate::kernels::simd::multiversion;

/// `src` itself when the element type is `f32`.
fn as_f32<T: Float>(src: &[T]) -> Option<&[f32]> {
    (T::DTYPE == DType::F32)
        .then(|| bytemuck::try_cast_slice(src).ok())
        .flatten()
}

/// `dst` itself when the element type is `f32`.
pub fn as_f32_mut<T: Float>(dst: &mut [T]) -> Option<&mut [f32]> {
    if T::DTYPE == DType::F32 {
        bytemuck::try_cast_slice_mut(dst).ok()
    } else {
        None
    }
}

multiversion! {
    /// Widens `src` into `dst`.
    fn widen<M: Madd, T: Float>(src: &[T], dst: &mut [f32]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s.to_f32();
        }
    }
}

multiversion! {
    /// Narrows `src` into `dst`, rounding to nearest even.
    fn narrow<M: Madd, T: Float>(src: &[f32], dst: &mut [T]) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = T::from_f32(s);
        }
    }
}

/// Writes `src` into `dst` (same length), narrowing to `T`.
pub fn store<T: Float>(src: &[f32], dst: &mut [T]) {
    match as_f32_mut(dst) {
        Some(d) => d.copy_from_slice(src),
        None => narrow(src, dst),
    }
}

/// An `f32` view of `src`: `src` itself for `f32`, else `buf` (grown as needed) holding it
/// widened.
pub fn f32_view<'a, T: Float>(src: &'a [T], buf: &'a mut Vec<f32>) -> &'a [f32] {
    if let Some(s) = as_f32(src) {
        return s;
    }
    if buf.len() < src.len() {
        buf.resize(src.len(), 0.0);
    }
    let buf = &mut buf[..src.len()];
    widen(src, buf);
    buf
}
