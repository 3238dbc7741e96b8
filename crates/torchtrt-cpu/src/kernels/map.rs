//! Parallel element-wise maps over contiguous tensors of the same length.

use crate::parallel::for_each_chunk;
use crate::scalar::FloatElem;
use crate::simd::multiversion;

/// `out[i] = f(x[i])` computed in `T`'s compute type (`x` and `out` have equal lengths), the
/// loop compiled for the CPU's widest vectors ([`multiversion!`]; `f` must be
/// `#[inline(always)]` or a closure to be compiled with it).
pub(super) fn map_float<T: FloatElem>(
    x: &[T],
    out: &mut [T],
    f: impl Fn(T::C) -> T::C + Sync + Send,
) {
    for_each_chunk(out, |start, chunk| {
        let (mut in_buf, mut out_buf) = (Vec::new(), Vec::new());
        let src = T::view(&x[start..start + chunk.len()], &mut in_buf);
        T::write(chunk, &mut out_buf, |dst| map_slice(src, dst, &f));
    });
}

multiversion! {
    /// `dst[i] = f(src[i])`.
    fn map_slice<C: Copy, F: Fn(C) -> C>(src: &[C], dst: &mut [C], f: &F) {
        for (o, &v) in dst.iter_mut().zip(src) {
            *o = f(v);
        }
    }
}

/// `out[i] = f(x[i])` (`x` and `out` have equal lengths).
pub(super) fn map<A: Copy + Sync, O: Send>(
    x: &[A],
    out: &mut [O],
    f: impl Fn(A) -> O + Sync + Send,
) {
    for_each_chunk(out, |start, chunk| {
        for (o, &v) in chunk.iter_mut().zip(&x[start..]) {
            *o = f(v);
        }
    });
}
