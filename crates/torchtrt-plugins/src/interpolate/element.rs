//! The element types the kernels read and write, converted to and from `f32` a row at a time.

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use torchtrt_plugin_api::Element;

/// A tensor element the kernels handle: f32, f16 or bf16. Rows are widened to `f32` for
/// computation and narrowed back on store; `f32` rows are used in place.
pub trait Elem: Element + Copy {
    /// Widens `src` into `dst` (same length).
    fn load(src: &[Self], dst: &mut [f32]);
    /// Narrows `src` into `dst` (same length), rounding to nearest.
    fn store(src: &[f32], dst: &mut [Self]);
    /// `src` itself when the element type is `f32`.
    fn as_f32(src: &[Self]) -> Option<&[f32]>;
    /// `dst` itself when the element type is `f32`.
    fn as_f32_mut(dst: &mut [Self]) -> Option<&mut [f32]>;
}

impl Elem for f32 {
    fn load(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn store(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn as_f32(src: &[f32]) -> Option<&[f32]> {
        Some(src)
    }
    fn as_f32_mut(dst: &mut [f32]) -> Option<&mut [f32]> {
        Some(dst)
    }
}

macro_rules! half_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn load(src: &[$t], dst: &mut [f32]) {
                src.convert_to_f32_slice(dst);
            }
            fn store(src: &[f32], dst: &mut [$t]) {
                dst.convert_from_f32_slice(src);
            }
            fn as_f32(_: &[$t]) -> Option<&[f32]> {
                None
            }
            fn as_f32_mut(_: &mut [$t]) -> Option<&mut [f32]> {
                None
            }
        }
    };
}
half_elem!(f16);
half_elem!(bf16);

/// Writes `src` into `dst` (same length), narrowing to `T`.
pub fn store<T: Elem>(src: &[f32], dst: &mut [T]) {
    match T::as_f32_mut(dst) {
        Some(d) => d.copy_from_slice(src),
        None => T::store(src, dst),
    }
}

/// An `f32` view of `src`: `src` itself for `f32`, else `buf` (resized) holding it widened.
pub fn f32_view<'a, T: Elem>(src: &'a [T], buf: &'a mut Vec<f32>) -> &'a [f32] {
    if let Some(s) = T::as_f32(src) {
        return s;
    }
    if buf.len() < src.len() {
        buf.resize(src.len(), 0.0);
    }
    let buf = &mut buf[..src.len()];
    T::load(src, buf);
    buf
}
