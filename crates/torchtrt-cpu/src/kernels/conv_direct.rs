//! Direct convolution for groups of one input channel (depthwise and channel-multiplier
//! convolutions). There im2col + gemm degenerates into thin products; instead each tap adds
//! a shifted input line, scaled by its weight, to an output line.

use super::convolution::ConvGeom;
use crate::linalg::{Epilogue, Window};
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Real};

/// Convolves when every group has one input channel (`geom.channels == geom.groups`), then
/// applies `epilogue`.
pub(super) fn conv_direct<T: FloatElem>(
    geom: &ConvGeom,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    epilogue: Epilogue,
    out: &mut [T],
) {
    let win = &geom.window;
    let (plane, outputs, taps) = (win.input_len(), win.output_len(), win.kernel_len());
    let per_group = geom.out_channels / geom.groups;
    let init = || (Vec::new(), Vec::new(), Vec::new());
    for_each_row(
        out,
        outputs,
        outputs * taps,
        init,
        |(xb, wb, ob), p, dst| {
            let (image, m) = (p / geom.out_channels, p % geom.out_channels);
            let channel = image * geom.channels + m / per_group;
            let src = T::view(&x[channel * plane..(channel + 1) * plane], xb);
            let weights = T::view(&w[m * taps..(m + 1) * taps], wb);
            let b = bias.map_or(T::C::ZERO, |b| b[m].to_c());
            T::write(dst, ob, |dst| {
                plane_conv(win, src, weights, b, dst);
                epilogue.apply(dst);
            });
        },
    );
}

/// One output plane from one input plane and its taps.
fn plane_conv<C: Real>(win: &Window, src: &[C], weights: &[C], bias: C, dst: &mut [C]) {
    if win.is_pointwise() {
        let w = weights[0];
        for (o, &v) in dst.iter_mut().zip(src) {
            *o = v * w + bias;
        }
        return;
    }
    let [_, o1, o2] = win.output;
    let [_, i1, i2] = win.input;
    let [_, k1, k2] = win.kernel;
    let s = win.stride[2];
    let spans: Vec<_> = (0..k2).map(|t| win.inner_span(t)).collect();
    dst.fill(bias);
    for (ab, line) in dst.chunks_exact_mut(o2).enumerate() {
        let (a, b) = (ab / o1, ab % o1);
        for t0 in win.valid_taps(0, a) {
            let p = win.coord(0, a, t0) as usize;
            for t1 in win.valid_taps(1, b) {
                let q = win.coord(1, b, t1) as usize;
                let row = &src[(p * i1 + q) * i2..(p * i1 + q + 1) * i2];
                let taps = &weights[(t0 * k1 + t1) * k2..(t0 * k1 + t1 + 1) * k2];
                for (&wv, (span, first)) in taps.iter().zip(&spans) {
                    let (span, first) = (span.clone(), *first);
                    let inside = &mut line[span];
                    if s == 1 {
                        for (o, &v) in inside.iter_mut().zip(&row[first..]) {
                            *o = *o + wv * v;
                        }
                    } else {
                        for (j, o) in inside.iter_mut().enumerate() {
                            *o = *o + wv * row[first + j * s];
                        }
                    }
                }
            }
        }
    }
}
