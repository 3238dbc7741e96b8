//! Convolutions whose window has taps that read only padding, for every output: a large
//! dilation on a small image (DeepLabV3's ASPP branches at dilations 24 and 36 on 28×28
//! features, where every tap but the centre row and column reads padding for every output).
//! Those taps add zeros; the layer is rewritten once, at prepare time, as the same
//! convolution over the taps that read the input, with less padding, so no path computes
//! them.

use torchtrt_core::Tensor;
use torchtrt_core::layers::Convolution;

/// The first and last tap along one dim that reads the input for some output: `n` input
/// elements, `pad` padding before them, `dilation`, `stride`, `taps` taps and `outputs`
/// outputs.
fn live_range(
    n: i64,
    pad: i64,
    dilation: i64,
    stride: i64,
    taps: i64,
    outputs: i64,
) -> Option<(i64, i64)> {
    let live = |k: i64| {
        let first = k * dilation - pad;
        let i = if first >= 0 {
            0
        } else {
            (-first + stride - 1) / stride
        };
        i < outputs && first + i * stride < n
    };
    let lo = (0..taps).find(|&k| live(k))?;
    let hi = (0..taps).rev().find(|&k| live(k))?;
    Some((lo, hi))
}

/// `layer` with weights `w` (`[M, C/g, KH, KW]`, f32) cut to the taps that read the input
/// of spatial dims `spatial`, with its padding reduced to match; `None` when every tap
/// reads the input somewhere or the cut layer would need negative padding.
pub(super) fn live_taps(
    layer: &Convolution,
    spatial: &[usize],
    w: &Tensor,
) -> Option<(Convolution, Tensor)> {
    let &[m, c, kh, kw] = w.shape() else {
        return None;
    };
    let ([h, wd], [sh, sw], [dh, dw]) = (
        <[usize; 2]>::try_from(spatial).ok()?,
        <[i64; 2]>::try_from(layer.strides.as_slice()).ok()?,
        <[i64; 2]>::try_from(layer.dilations.as_slice()).ok()?,
    );
    let (pads, ends) = (&layer.pads_begin, &layer.pads_end);
    if pads.len() != 2 || ends.len() != 2 || sh < 1 || sw < 1 || dh < 1 || dw < 1 {
        return None;
    }
    let mut ranges = [(0, 0); 2];
    let dims = [(h, kh, sh, dh), (wd, kw, sw, dw)];
    for (d, &(n, k, s, dl)) in dims.iter().enumerate() {
        let (n, k) = (i64::try_from(n).ok()?, i64::try_from(k).ok()?);
        let span = dl.checked_mul(k - 1)? + 1;
        let room = n + pads[d] + ends[d] - span;
        if room < 0 {
            return None;
        }
        ranges[d] = live_range(n, pads[d], dl, s, k, room / s + 1)?;
    }
    let full = |d: usize, k: usize| ranges[d] == (0, k as i64 - 1);
    if full(0, kh) && full(1, kw) {
        return None;
    }
    let mut cut = layer.clone();
    for (d, &(_, k, _, dl)) in dims.iter().enumerate() {
        let (lo, hi) = ranges[d];
        cut.pads_begin[d] = pads[d] - lo * dl;
        cut.pads_end[d] = ends[d] - (k as i64 - 1 - hi) * dl;
    }
    if cut.pads_begin.iter().chain(&cut.pads_end).any(|&p| p < 0) {
        return None;
    }
    let values = w.as_slice::<f32>().ok()?;
    let (rows, cols) = (ranges[0], ranges[1]);
    let (nh, nw) = (
        (rows.1 - rows.0 + 1) as usize,
        (cols.1 - cols.0 + 1) as usize,
    );
    let mut kept = Vec::with_capacity(m * c * nh * nw);
    for filter in values.chunks_exact(kh * kw) {
        for y in rows.0 as usize..=rows.1 as usize {
            kept.extend_from_slice(&filter[y * kw + cols.0 as usize..=y * kw + cols.1 as usize]);
        }
    }
    let w = Tensor::from_vec(&[m, c, nh, nw], kept).ok()?;
    Some((cut, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(pad: i64, dilation: i64, stride: i64) -> Convolution {
        let mut l = Convolution::new(2);
        l.pads_begin = vec![pad; 2];
        l.pads_end = vec![pad; 2];
        l.dilations = vec![dilation; 2];
        l.strides = vec![stride; 2];
        l
    }

    fn weights(kh: usize, kw: usize) -> Tensor {
        let n = 2 * 3 * kh * kw;
        Tensor::from_vec(&[2, 3, kh, kw], (0..n).map(|v| v as f32).collect()).unwrap()
    }

    #[test]
    fn only_the_centre_reads_a_small_image_at_a_large_dilation() {
        let (cut, w) = live_taps(&layer(36, 36, 1), &[28, 28], &weights(3, 3)).unwrap();
        assert_eq!((cut.pads_begin, cut.pads_end), (vec![0, 0], vec![0, 0]));
        assert_eq!(w.shape(), [2, 3, 1, 1]);
        let centres: Vec<f32> = (0..6).map(|f| (f * 9 + 4) as f32).collect();
        assert_eq!(w.as_slice::<f32>().unwrap(), centres);
    }

    #[test]
    fn taps_that_read_the_input_for_some_output_stay() {
        assert!(live_taps(&layer(24, 24, 1), &[28, 28], &weights(3, 3)).is_none());
        assert!(live_taps(&layer(1, 1, 1), &[7, 7], &weights(3, 3)).is_none());
        assert!(live_taps(&layer(12, 12, 2), &[28, 28], &weights(3, 3)).is_none());
    }

    #[test]
    fn a_cut_that_would_need_negative_padding_is_not_made() {
        let mut l = layer(4, 5, 1);
        l.pads_end = vec![6, 6];
        assert!(live_taps(&l, &[3, 3], &weights(3, 3)).is_none());
    }

    #[test]
    fn one_dim_is_cut_and_the_other_kept() {
        let mut l = layer(0, 1, 1);
        l.pads_begin = vec![5, 1];
        l.pads_end = vec![5, 1];
        l.dilations = vec![5, 1];
        let (cut, w) = live_taps(&l, &[3, 6], &weights(3, 3)).unwrap();
        assert_eq!((cut.pads_begin, cut.pads_end), (vec![0, 1], vec![0, 1]));
        assert_eq!(w.shape(), [2, 3, 1, 3]);
        assert_eq!(&w.as_slice::<f32>().unwrap()[..3], [3.0, 4.0, 5.0]);
    }
}
