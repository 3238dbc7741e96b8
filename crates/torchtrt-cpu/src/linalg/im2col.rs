//! im2col: unfolds sliding windows into the columns of a matrix so a convolution becomes a
//! matrix product. Only a range of output positions (a column tile) is unfolded at a time,
//! so the matrix of one tile stays in cache while the product reads it.

use std::ops::Range;

use super::window::Window;

/// Writes columns `cols` of the `(channels · taps) × outputs` matrix of `x` (`channels`
/// planes of `window.input_len()` elements) into `col`, row-major with `cols.len()` columns:
/// row `(c, tap)` holds, for each output position in `cols`, the input element under that
/// tap, or `zero` in padding.
pub(crate) fn im2col<T: Copy>(
    x: &[T],
    channels: usize,
    window: &Window,
    zero: T,
    cols: Range<usize>,
    col: &mut [T],
) {
    let [k0, k1, k2] = window.kernel;
    let [_, o1, o2] = window.output;
    let [_, i1, i2] = window.input;
    let plane = window.input_len();
    let width = cols.len();
    if width == 0 {
        return;
    }
    let spans: Vec<_> = (0..k2).map(|t| window.inner_span(t)).collect();
    let mut rows = col.chunks_exact_mut(width);
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for t0 in 0..k0 {
            for t1 in 0..k1 {
                for span in &spans {
                    let Some(row) = rows.next() else { return };
                    let mut j = cols.start;
                    while j < cols.end {
                        let (line, xo) = (j / o2, j % o2);
                        let len = (o2 - xo).min(cols.end - j);
                        let dst = &mut row[j - cols.start..j - cols.start + len];
                        let (a, b) = (line / o1, line % o1);
                        match (window.tap(0, a, t0), window.tap(1, b, t1)) {
                            (Some(p), Some(q)) => {
                                let start = (p * i1 + q) * i2;
                                let line = &src[start..start + i2];
                                fill_segment(dst, line, span, xo, window.stride[2], zero);
                            }
                            _ => dst.fill(zero),
                        }
                        j += len;
                    }
                }
            }
        }
    }
}

/// Fills outputs `xo..xo + dst.len()` of one output line from one input line `src`; `span`
/// is the innermost tap's [`Window::inner_span`], `s` the innermost stride.
fn fill_segment<T: Copy>(
    dst: &mut [T],
    src: &[T],
    span: &(Range<usize>, usize),
    xo: usize,
    s: usize,
    zero: T,
) {
    let (inside, first) = (&span.0, span.1);
    let end = xo + dst.len();
    let lo = inside.start.clamp(xo, end);
    let hi = inside.end.clamp(lo, end);
    let (head, rest) = dst.split_at_mut(lo - xo);
    let (body, tail) = rest.split_at_mut(hi - lo);
    head.fill(zero);
    tail.fill(zero);
    if body.is_empty() {
        return;
    }
    let from = first + (lo - inside.start) * s;
    if s == 1 {
        body.copy_from_slice(&src[from..from + body.len()]);
    } else {
        for (j, v) in body.iter_mut().enumerate() {
            *v = src[from + j * s];
        }
    }
}
