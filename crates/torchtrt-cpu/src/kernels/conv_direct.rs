//! Direct convolution for groups of one input channel (depthwise and channel-multiplier
//! convolutions). There im2col + gemm degenerates into thin products; instead each tap adds
//! a shifted input line, scaled by its weight, to an output line.

use super::convolution::ConvGeom;
use super::depthwise_lanes;
use super::tap_rows::{self, Chains, TapRows};
use crate::linalg::{Epilogue, Window};
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Real, as_f32, as_f32_mut};

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
    if let (Some(x), Some(w), Some(out)) = (as_f32(x), as_f32(w), as_f32_mut(out))
        && depthwise_lanes::applies(geom)
    {
        let bias = bias.and_then(as_f32);
        return depthwise_lanes::run(geom, x, w, bias, epilogue, out);
    }
    let win = &geom.window;
    let (plane, outputs, taps) = (win.input_len(), win.output_len(), win.kernel_len());
    let per_group = geom.out_channels / geom.groups;
    let planar =
        win.input[0] == 1 && win.kernel[0] == 1 && win.output[0] == 1 && win.pad_begin[0] == 0;
    let init = || {
        let scratch = (Vec::new(), Vec::new(), None);
        (Vec::new(), Vec::new(), Vec::new(), scratch)
    };
    for_each_row(
        out,
        outputs,
        outputs * taps,
        init,
        |(xb, wb, ob, scratch), p, dst| {
            let (image, m) = (p / geom.out_channels, p % geom.out_channels);
            let channel = image * geom.channels + m / per_group;
            let src = T::view(&x[channel * plane..(channel + 1) * plane], xb);
            let weights = T::view(&w[m * taps..(m + 1) * taps], wb);
            let b = bias.map_or(T::C::ZERO, |b| b[m].to_c());
            T::write(dst, ob, |dst| {
                if planar && !win.is_pointwise() {
                    let k = PlaneTaps {
                        weights,
                        bias: b,
                        epilogue,
                    };
                    padded_plane(win, src, k, dst, scratch);
                } else {
                    plane_conv(win, src, weights, b, dst);
                    epilogue.apply(dst);
                }
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

/// A task's scratch for [`padded_plane`]: the zero-padded input plane (its padding is
/// written once per task: every plane of a layer has the same geometry), the accumulator
/// of [`Taps::accumulate`]'s single run and the taps' offsets and chains.
type Scratch<C> = (Vec<C>, Vec<C>, Option<Chains>);

/// One output plane of a 1-D or 2-D window through a zero-padded copy of the input plane,
/// so that no tap needs bounds: with stride 1 each tap is one multiply-add pass over the
/// whole plane (rows `width` apart, the extra columns dropped at the end), otherwise over
/// each output line, the input read with the stride specialised. Compiled for the widest
/// vector instructions the CPU has.
fn padded_plane<C: Real>(
    win: &Window,
    src: &[C],
    k: PlaneTaps<'_, C>,
    dst: &mut [C],
    scratch: &mut Scratch<C>,
) {
    macro_rules! versions {
        ($name:ident, $($feature:literal)?) => {
            $(#[target_feature(enable = $feature)])?
            fn $name<C: Real>(
                win: &Window,
                src: &[C],
                k: PlaneTaps<'_, C>,
                dst: &mut [C],
                scratch: &mut Scratch<C>,
            ) {
                match (win.stride[1], win.stride[2]) {
                    (1, 1) => padded_body::<C, 1>(win, src, k, dst, scratch),
                    (2, 2) if win.dilation[1..] == [1, 1] => {
                        phased_body(win, src, k, dst, scratch)
                    }
                    (_, 2) if win.dilation[2] == 1 => {
                        deinterleaved_body(win, src, k, dst, scratch)
                    }
                    (_, 2) => padded_body::<C, 2>(win, src, k, dst, scratch),
                    _ => padded_body::<C, 0>(win, src, k, dst, scratch),
                }
            }
        };
    }
    versions!(generic,);
    #[cfg(target_arch = "x86_64")]
    {
        versions!(v4, "avx512f,avx2,fma");
        versions!(v3, "avx2,fma");
        if crate::simd::v4() {
            // SAFETY: `v4()` holds only when the CPU has AVX-512 F, AVX2 and FMA.
            return unsafe { v4(win, src, k, dst, scratch) };
        }
        if crate::simd::v3() {
            // SAFETY: `v3()` holds only when the CPU has AVX2 and FMA.
            return unsafe { v3(win, src, k, dst, scratch) };
        }
    }
    generic(win, src, k, dst, scratch)
}

/// [`padded_plane`]'s body; `SW` is the innermost stride (1, 2, or 0 for one read at run
/// time). `SW == 1` is used only when both strides are 1.
#[inline(always)]
fn padded_body<C: Real, const SW: usize>(
    win: &Window,
    src: &[C],
    k: PlaneTaps<'_, C>,
    dst: &mut [C],
    (padded, acc, chains): &mut Scratch<C>,
) {
    let [_, ih, iw] = win.input;
    let [_, kh, kw] = win.kernel;
    let [_, dh, dw] = win.dilation;
    let [_, oh, ow] = win.output;
    let sh = win.stride[1];
    let sw = if SW == 0 { win.stride[2] } else { SW };
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    let width = (ow * sw + (kw - 1) * dw).max(pl + iw);
    let height = ((oh - 1) * sh + (kh - 1) * dh + 1).max(pt + ih);
    if padded.len() != height * width {
        padded.clear();
        padded.resize(height * width, C::ZERO);
    }
    for (y, line) in padded.chunks_exact_mut(width).enumerate().skip(pt).take(ih) {
        copy_row(
            &mut line[pl..pl + iw],
            &src[(y - pt) * iw..(y - pt + 1) * iw],
        );
    }
    let padded = &padded[..];
    if SW == 1 {
        let chains = tap_chains(chains, kh, kw, width, |ky, kx| ky * dh * width + kx * dw);
        let taps = Taps {
            src: padded,
            chains,
            k,
        };
        taps.accumulate(oh, ow, dst, acc);
    } else {
        for (r, out) in dst.chunks_exact_mut(ow).enumerate() {
            multiply_add(out, k.bias, k.weights, |t| {
                let (ky, kx) = (t / kw, t % kw);
                let at = (r * sh + ky * dh) * width + kx * dw;
                padded[at..at + ow * sw].chunks_exact(sw).map(|c| c[0])
            });
        }
        k.epilogue.apply(dst);
    }
}

/// [`padded_plane`]'s body for an innermost stride of 2 without dilation: each padded row
/// is stored as its even columns followed by its odd columns, so every tap of an output
/// line reads consecutive elements (tap `kx` of output `j` is column `2j + kx`: even half
/// at `j + kx/2` for even `kx`, odd half at `j + kx/2` for odd `kx`).
#[inline(always)]
fn deinterleaved_body<C: Real>(
    win: &Window,
    src: &[C],
    k: PlaneTaps<'_, C>,
    dst: &mut [C],
    (padded, acc, chains): &mut Scratch<C>,
) {
    let [_, ih, iw] = win.input;
    let [_, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let (sh, dh) = (win.stride[1], win.dilation[1]);
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    let half = (2 * ow + kw - 1).max(pl + iw).div_ceil(2);
    let row_len = 2 * half;
    let height = ((oh - 1) * sh + (kh - 1) * dh + 1).max(pt + ih);
    if padded.len() != height * row_len {
        padded.clear();
        padded.resize(height * row_len, C::ZERO);
    }
    for (y, line) in padded
        .chunks_exact_mut(row_len)
        .enumerate()
        .skip(pt)
        .take(ih)
    {
        deinterleave_row(line, half, pl, &src[(y - pt) * iw..(y - pt + 1) * iw]);
    }
    let chains = tap_chains(chains, kh, kw, sh * row_len, |ky, kx| {
        ky * dh * row_len + (kx % 2) * half + kx / 2
    });
    let taps = Taps {
        src: padded,
        chains,
        k,
    };
    taps.accumulate(oh, ow, dst, acc);
}

/// [`padded_plane`]'s body for strides of 2 along both dims without dilation: the padded
/// plane is stored as its four phases (even or odd rows × even or odd columns), each
/// `rows × half`, so that every tap reads one contiguous run for the whole output plane
/// (tap `(ky, kx)` of output `(r, j)` is phase `(ky mod 2, kx mod 2)` at row `r + ky/2`,
/// column `j + kx/2`). As with stride 1 each tap is one pass over all outputs, rows `half`
/// apart, the extra columns dropped at the end; small planes (7×7 outputs) then make long
/// passes instead of one short pass per output line.
#[inline(always)]
fn phased_body<C: Real>(
    win: &Window,
    src: &[C],
    k: PlaneTaps<'_, C>,
    dst: &mut [C],
    (padded, acc, chains): &mut Scratch<C>,
) {
    let [_, ih, iw] = win.input;
    let [_, kh, kw] = win.kernel;
    let [_, oh, ow] = win.output;
    let (pt, pl) = (win.pad_begin[1], win.pad_begin[2]);
    let half = (ow + (kw - 1) / 2).max((pl + iw).div_ceil(2));
    let rows = (oh + (kh - 1) / 2).max((pt + ih).div_ceil(2));
    let phase = rows * half;
    if padded.len() != 4 * phase {
        padded.clear();
        padded.resize(4 * phase, C::ZERO);
    }
    for (y, line) in src.chunks_exact(iw).take(ih).enumerate() {
        let (py, r) = ((y + pt) % 2, (y + pt) / 2);
        let (evens, odds) = padded.split_at_mut((2 * py + 1) * phase);
        let even = &mut evens[2 * py * phase + r * half..][..half];
        deinterleave_into(even, &mut odds[r * half..][..half], pl, line);
    }
    let chains = tap_chains(chains, kh, kw, half, |ky, kx| {
        ((ky % 2) * 2 + kx % 2) * phase + (ky / 2) * half + kx / 2
    });
    let taps = Taps {
        src: padded,
        chains,
        k,
    };
    taps.accumulate(oh, ow, dst, acc);
}

/// Writes `row` into columns `pl..` of a padded row stored as its `half` even columns
/// followed by its odd columns.
#[inline(always)]
pub(super) fn deinterleave_row<C: Real>(line: &mut [C], half: usize, pl: usize, row: &[C]) {
    let (even, odd) = line.split_at_mut(half);
    deinterleave_into(even, odd, pl, row);
}

/// Writes `row` into columns `pl..` of a padded row stored as its even columns (`even`)
/// and its odd columns (`odd`).
#[inline(always)]
fn deinterleave_into<C: Real>(even: &mut [C], odd: &mut [C], pl: usize, row: &[C]) {
    let (first, second) = if pl.is_multiple_of(2) {
        (&mut even[pl / 2..], &mut odd[pl / 2..])
    } else {
        (&mut odd[pl / 2..], &mut even[pl / 2 + 1..])
    };
    if let (Some(row), Some(first), Some(second)) =
        (as_f32(row), as_f32_mut(first), as_f32_mut(second))
        && tap_rows::deinterleave(first, second, row)
    {
        return;
    }
    for ((a, b), pair) in first
        .iter_mut()
        .zip(second.iter_mut())
        .zip(row.chunks_exact(2))
    {
        *a = pair[0];
        *b = pair[1];
    }
    if row.len() % 2 == 1 {
        first[row.len() / 2] = row[row.len() - 1];
    }
}

/// Copies `src` into `dst`, by [`tap_rows::copy`] where it runs.
#[inline(always)]
fn copy_row<C: Real>(dst: &mut [C], src: &[C]) {
    if let (Some(d), Some(s)) = (as_f32_mut(dst), as_f32(src))
        && tap_rows::copy(d, s)
    {
        return;
    }
    dst.copy_from_slice(src);
}

/// The chains of the `kh × kw` taps at `at(ky, kx)` for output rows `stride` apart, built
/// on a task's first plane: its planes share one layer's geometry.
#[inline(always)]
fn tap_chains(
    chains: &mut Option<Chains>,
    kh: usize,
    kw: usize,
    stride: usize,
    at: impl Fn(usize, usize) -> usize,
) -> &Chains {
    chains.get_or_insert_with(|| {
        let taps = (0..kh).flat_map(|ky| (0..kw).map(move |kx| (ky, kx)));
        Chains::new(taps.map(|(ky, kx)| at(ky, kx)).collect(), stride)
    })
}

/// One plane's weights, bias and fused activation.
#[derive(Clone, Copy)]
struct PlaneTaps<'a, C> {
    weights: &'a [C],
    bias: C,
    epilogue: Epilogue,
}

/// Output rows of one plane from taps at fixed offsets of a prepared buffer: output `(r, j)`
/// is `f(bias + Σₜ weights[t] · src[r · stride + offsets[t] + j])`, `f` the epilogue.
struct Taps<'a, C> {
    src: &'a [C],
    chains: &'a Chains,
    k: PlaneTaps<'a, C>,
}

impl<C: Real> Taps<'_, C> {
    /// Writes the `rows × len` outputs into `dst`, row by row, or as one run over the rows
    /// and the `stride - len` columns between them (into `acc`, then copied out) when rows
    /// would fill at most half their vectors and the run takes fewer: narrow planes (7×7)
    /// fill their vectors that way. Wider rows keep the loads that rows computed together
    /// share and need no copy.
    fn accumulate(&self, rows: usize, len: usize, dst: &mut [C], acc: &mut Vec<C>) {
        const LANES: usize = 16;
        let stride = self.chains.stride;
        let run = (rows.max(1) - 1) * stride + len;
        let vectors = rows * len.div_ceil(LANES);
        if 2 * rows * len <= LANES * vectors && run.div_ceil(LANES) < vectors {
            acc.truncate(run);
            acc.resize(run, C::ZERO);
            self.rows(1, run, acc);
            for (r, out) in dst.chunks_exact_mut(len).enumerate() {
                copy_row(out, &acc[r * stride..r * stride + len]);
            }
        } else {
            self.rows(rows, len, dst);
        }
    }

    /// [`Self::accumulate`] row by row, through [`TapRows`] where it runs.
    fn rows(&self, rows: usize, len: usize, dst: &mut [C]) {
        let k = self.k;
        let fast = (
            as_f32(self.src),
            as_f32(k.weights),
            as_f32(std::slice::from_ref(&k.bias)),
            as_f32_mut(dst),
        );
        if let (Some(src), Some(weights), Some(&[bias]), Some(dst)) = fast {
            let taps = TapRows {
                src,
                chains: self.chains,
                weights,
                bias,
                epilogue: k.epilogue,
            };
            if taps.run(rows, len, dst) {
                return;
            }
        }
        for (r, out) in dst.chunks_exact_mut(len).take(rows).enumerate() {
            multiply_add(out, k.bias, k.weights, |t| {
                let at = r * self.chains.stride + self.chains.offsets[t];
                self.src[at..at + len].iter().copied()
            });
            k.epilogue.apply(out);
        }
    }
}

/// `acc = bias + Σₜ weights[t]·source(t)` element-wise, three taps per pass so each pass
/// reads and writes `acc` once for three multiply-adds.
#[inline(always)]
fn multiply_add<C: Real, I: Iterator<Item = C>>(
    acc: &mut [C],
    bias: C,
    weights: &[C],
    source: impl Fn(usize) -> I,
) {
    let n = weights.len();
    let mut t = 0;
    if n >= 3 {
        let (w0, w1, w2) = (weights[0], weights[1], weights[2]);
        let sources = source(0).zip(source(1)).zip(source(2));
        for (a, ((x, y), z)) in acc.iter_mut().zip(sources) {
            *a = bias + w0 * x + w1 * y + w2 * z;
        }
        t = 3;
    } else {
        acc.fill(bias);
    }
    while t + 3 <= n {
        let (w0, w1, w2) = (weights[t], weights[t + 1], weights[t + 2]);
        let sources = source(t).zip(source(t + 1)).zip(source(t + 2));
        for (a, ((x, y), z)) in acc.iter_mut().zip(sources) {
            *a = *a + w0 * x + w1 * y + w2 * z;
        }
        t += 3;
    }
    for (t, &w0) in weights.iter().enumerate().skip(t) {
        for (a, x) in acc.iter_mut().zip(source(t)) {
            *a = *a + w0 * x;
        }
    }
}
