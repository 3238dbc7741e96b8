//! im2col: unfolds sliding windows into the columns of a matrix so a convolution becomes a
//! matrix product.

use super::window::Window;

/// Writes the `(channels · taps) × outputs` matrix of `x` (`channels` planes of
/// `window.input_len()` elements) into `col`: row `(c, tap)` holds, for every output
/// position, the input element under that tap, or `zero` in padding.
pub(crate) fn im2col<T: Copy>(x: &[T], channels: usize, window: &Window, zero: T, col: &mut [T]) {
    let [k0, k1, k2] = window.kernel;
    let [o0, o1, o2] = window.output;
    let [_, i1, i2] = window.input;
    let plane = window.input_len();
    let outputs = window.output_len();
    let mut rows = col.chunks_exact_mut(outputs);
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for t0 in 0..k0 {
            for t1 in 0..k1 {
                for t2 in 0..k2 {
                    let Some(row) = rows.next() else { return };
                    let mut lines = row.chunks_exact_mut(o2);
                    for a in 0..o0 {
                        let c0 = window.tap(0, a, t0);
                        for b in 0..o1 {
                            let Some(line) = lines.next() else { return };
                            match (c0, window.tap(1, b, t1)) {
                                (Some(p), Some(q)) => {
                                    let start = (p * i1 + q) * i2;
                                    fill_line(line, &src[start..start + i2], window, t2, zero);
                                }
                                _ => line.fill(zero),
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Fills one output line for innermost tap `t` from one input line.
fn fill_line<T: Copy>(line: &mut [T], src: &[T], window: &Window, t: usize, zero: T) {
    let (span, first) = window.inner_span(t);
    let s = window.stride[2];
    line[..span.start].fill(zero);
    line[span.end..].fill(zero);
    let inside = &mut line[span];
    if s == 1 {
        inside.copy_from_slice(&src[first..first + inside.len()]);
    } else {
        for (j, v) in inside.iter_mut().enumerate() {
            *v = src[first + j * s];
        }
    }
}
