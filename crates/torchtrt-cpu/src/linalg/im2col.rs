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
    let segments = segments(cols, o1, o2);
    let s = window.stride[2];
    let planar = window.input[0] == 1 && window.kernel[0] == 1 && window.output[0] == 1;
    if s > 1 && planar && window.tap(0, 0, 0).is_some() {
        return phased(x, channels, window, zero, &segments, col, &spans);
    }
    let mut rows = col.chunks_exact_mut(width);
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for t0 in 0..k0 {
            for t1 in 0..k1 {
                for span in &spans {
                    let Some(row) = rows.next() else { return };
                    for seg in &segments {
                        let dst = &mut row[seg.at..seg.at + seg.len];
                        match (window.tap(0, seg.a, t0), window.tap(1, seg.b, t1)) {
                            (Some(p), Some(q)) => {
                                let start = (p * i1 + q) * i2;
                                let line = &src[start..start + i2];
                                fill_segment(dst, line, span, seg.xo, s, zero);
                            }
                            _ => dst.fill(zero),
                        }
                    }
                }
            }
        }
    }
}

/// The part of one output line inside a column tile.
struct Segment {
    /// Offset in the tile.
    at: usize,
    /// Elements.
    len: usize,
    /// First output position along the innermost dim.
    xo: usize,
    /// Output coordinates along the outer two dims.
    a: usize,
    b: usize,
}

/// The output lines (of `o2` positions, `o1` lines per outer step) that columns `cols` cut.
fn segments(cols: Range<usize>, o1: usize, o2: usize) -> Vec<Segment> {
    let mut out = Vec::with_capacity(cols.len() / o2.max(1) + 2);
    let mut j = cols.start;
    while j < cols.end {
        let (line, xo) = (j / o2, j % o2);
        let len = (o2 - xo).min(cols.end - j);
        out.push(Segment {
            at: j - cols.start,
            len,
            xo,
            a: line / o1,
            b: line % o1,
        });
        j += len;
    }
    out
}

/// [`im2col`] of 1-D and 2-D windows with an innermost stride `s` above 1: each input line
/// the column tile reads is split once into its `s` phases (elements `p, p + s, …`), so every
/// tap's segment is a contiguous copy instead of a strided gather.
fn phased<T: Copy>(
    x: &[T],
    channels: usize,
    window: &Window,
    zero: T,
    segments: &[Segment],
    col: &mut [T],
    spans: &[(Range<usize>, usize)],
) {
    let [_, k1, _] = window.kernel;
    let [_, i1, i2] = window.input;
    let s = window.stride[2];
    let (Some(first), Some(last)) = (segments.first(), segments.last()) else {
        return;
    };
    let (plane, width, pw) = (window.input_len(), last.at + last.len, i2.div_ceil(s));
    let (first_line, last_line) = (first.b, last.b);
    let reach = |line: usize, t: usize| window.coord(1, line, t).clamp(0, i1 as isize) as usize;
    let (y0, y1) = (
        reach(first_line, 0),
        reach(last_line, k1 - 1).max(reach(first_line, 0)),
    );
    let y1 = (y1 + 1).min(i1);
    let mut split = vec![zero; (y1 - y0) * s * pw];
    let mut rows = col.chunks_exact_mut(width);
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for (y, phases) in (y0..y1).zip(split.chunks_exact_mut(s * pw)) {
            split_phases(&src[y * i2..(y + 1) * i2], s, pw, phases);
        }
        for t1 in 0..k1 {
            for span in spans {
                let Some(row) = rows.next() else { return };
                for seg in segments {
                    let dst = &mut row[seg.at..seg.at + seg.len];
                    match window.tap(1, seg.b, t1) {
                        Some(q) if (y0..y1).contains(&q) => {
                            let phases = &split[(q - y0) * s * pw..(q - y0 + 1) * s * pw];
                            fill_phased(dst, phases, pw, span, seg.xo, s, zero);
                        }
                        _ => dst.fill(zero),
                    }
                }
            }
        }
    }
}

/// Splits `line` into its `s` phases (elements `p, p + s, …`), `pw` elements apart in
/// `phases`.
fn split_phases<T: Copy>(line: &[T], s: usize, pw: usize, phases: &mut [T]) {
    let whole = line.len() / s;
    if s == 2 {
        let (even, odd) = phases.split_at_mut(pw);
        for ((e, o), pair) in even
            .iter_mut()
            .zip(odd.iter_mut())
            .zip(line.chunks_exact(2))
        {
            *e = pair[0];
            *o = pair[1];
        }
    } else {
        for (q, group) in line.chunks_exact(s).enumerate() {
            for (p, &v) in group.iter().enumerate() {
                phases[p * pw + q] = v;
            }
        }
    }
    for (p, &v) in line[whole * s..].iter().enumerate() {
        phases[p * pw + whole] = v;
    }
}

/// [`fill_segment`] from one input line split into `s` phases of `pw` elements.
fn fill_phased<T: Copy>(
    dst: &mut [T],
    phases: &[T],
    pw: usize,
    span: &(Range<usize>, usize),
    xo: usize,
    s: usize,
    zero: T,
) {
    let Some((body, from)) = inside_part(dst, span, xo, s, zero) else {
        return;
    };
    let start = (from % s) * pw + from / s;
    body.copy_from_slice(&phases[start..start + body.len()]);
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
    let Some((body, from)) = inside_part(dst, span, xo, s, zero) else {
        return;
    };
    if s == 1 {
        body.copy_from_slice(&src[from..from + body.len()]);
    } else {
        for (j, v) in body.iter_mut().enumerate() {
            *v = src[from + j * s];
        }
    }
}

/// Zero-fills the outputs of `dst` (outputs `xo..xo + dst.len()` of one line) that `span`
/// (the innermost tap's [`Window::inner_span`], stride `s`) puts in the padding, and returns
/// the rest with the input index of its first output; `None` when every output is padding.
fn inside_part<'a, T: Copy>(
    dst: &'a mut [T],
    span: &(Range<usize>, usize),
    xo: usize,
    s: usize,
    zero: T,
) -> Option<(&'a mut [T], usize)> {
    let (inside, first) = (&span.0, span.1);
    let end = xo + dst.len();
    let lo = inside.start.clamp(xo, end);
    let hi = inside.end.clamp(lo, end);
    let (head, rest) = dst.split_at_mut(lo - xo);
    let (body, tail) = rest.split_at_mut(hi - lo);
    head.fill(zero);
    tail.fill(zero);
    (!body.is_empty()).then(|| (body, first + (lo - inside.start) * s))
}
