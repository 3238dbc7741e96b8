//! Max, average and Lp pooling over 1 to 3 spatial dims.

use torchtrt_core::layers::{PoolKind, Pooling};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::conv_direct::deinterleave_row;
use super::{max_pool_inside, max_pool3};
use crate::dispatch::with_float;
use crate::linalg::{Window, WindowParams};
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Real};
use crate::scratch::Kept;
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Pooling";

struct PoolKernel {
    layer: Pooling,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Pooling,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(PoolKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for PoolKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        if x.rank() < 3 {
            return Err(format!("{WHAT} needs [N,C,spatial…], got {x}"));
        }
        let l = &self.layer;
        let params = WindowParams {
            kernel: &l.kernel,
            strides: &l.strides,
            dilations: &l.dilations,
            pads_begin: &l.pads_begin,
            pads_end: &l.pads_end,
            ceil_mode: l.ceil_mode,
        };
        let window = Window::new(&x.shape()[2..], &params).map_err(|e| format!("{WHAT}: {e}"))?;
        let mut shape = x.shape()[..2].to_vec();
        shape.extend_from_slice(window.output_dims(x.rank() - 2));
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        if self.dtype == DType::F32 && l.kind == PoolKind::Max && max_pool3::applies(&window) {
            max_pool3::run(&window, elems(x)?, elems_mut(out)?);
            return Ok(());
        }
        if self.dtype == DType::F32 && l.kind == PoolKind::Max && max_pool_inside::applies(&window)
        {
            max_pool_inside::run(&window, elems(x)?, elems_mut(out)?);
            return Ok(());
        }
        let pool = Pool {
            window: merge_pointwise_inner(window),
            kind: l.kind,
            count_include_pad: l.count_include_pad,
        };
        with_float!(self.dtype, WHAT, T => {
            pool.run::<T>(elems(x)?, elems_mut(out)?);
            Ok(())
        })
    }
}

/// When the window covers one element of the inner two dims (kernel 1, stride 1, no
/// padding there; LRN's channel window `[size, 1, 1]`), those dims pooled as one long line:
/// each output line then spans a whole plane instead of one row.
fn merge_pointwise_inner(w: Window) -> Window {
    let flat = (1..3)
        .all(|d| w.kernel[d] == 1 && w.stride[d] == 1 && w.pad_begin[d] == 0 && w.pad_end[d] == 0);
    if !flat || w.input[1] == 1 {
        return w;
    }
    let inner = w.input[1] * w.input[2];
    Window {
        input: [w.input[0], 1, inner],
        output: [w.output[0], 1, inner],
        kernel: [w.kernel[0], 1, 1],
        stride: [w.stride[0], 1, 1],
        dilation: [w.dilation[0], 1, 1],
        pad_begin: [w.pad_begin[0], 0, 0],
        pad_end: [w.pad_end[0], 0, 0],
    }
}

struct Pool {
    window: Window,
    kind: PoolKind,
    count_include_pad: bool,
}

/// The taps of one output position along one dim: the first input coordinate read, how
/// many taps read the input, and how many lie inside the input or its padding.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    valid: usize,
    padded: usize,
}

/// A pooling reduction, monomorphised so the inner loops carry no dispatch.
trait Reduction<C: Real>: Copy {
    /// Whether reducing a value twice leaves the result unchanged (max), so a window may
    /// be covered by two overlapping windows of a power-of-two width.
    const IDEMPOTENT: bool = false;
    fn start(self) -> C;
    fn step(self, acc: C, v: C) -> C;
    /// The result of a window of `count` taps (inside the input or, with
    /// `count_include_pad`, its padding) whose taps reduced to `acc`.
    fn finish(self, acc: C, count: C) -> C;
}

#[derive(Clone, Copy)]
struct MaxOf;
#[derive(Clone, Copy)]
struct MeanOf;
#[derive(Clone, Copy)]
struct LpOf(i64);

impl<C: Real> Reduction<C> for MaxOf {
    const IDEMPOTENT: bool = true;
    #[inline(always)]
    fn start(self) -> C {
        C::NEG_INFINITY
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        if v > acc { v } else { acc }
    }
    #[inline(always)]
    fn finish(self, acc: C, _: C) -> C {
        acc
    }
}

impl<C: Real> Reduction<C> for MeanOf {
    #[inline(always)]
    fn start(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc + v
    }
    #[inline(always)]
    fn finish(self, acc: C, count: C) -> C {
        if count == C::ZERO {
            C::ZERO
        } else {
            acc / count
        }
    }
}

impl<C: Real> Reduction<C> for LpOf {
    #[inline(always)]
    fn start(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        match self.0 {
            1 => acc + v.abs(),
            2 => acc + v * v,
            p => acc + v.abs().powf(C::from_f64(p as f64)),
        }
    }
    #[inline(always)]
    fn finish(self, acc: C, _: C) -> C {
        match self.0 {
            1 => acc,
            2 => acc.sqrt(),
            p => acc.powf(C::from_f64(1.0 / p as f64)),
        }
    }
}

impl Pool {
    /// Pools 1-D and 2-D max and average windows a plane at a time ([`Pool::plane_body`]),
    /// the rest one output line (the innermost dim) at a time, lines or planes in parallel;
    /// the inner loops run over consecutive outputs. Types computed in a wider type are
    /// converted a plane per task.
    fn run<T: FloatElem>(&self, x: &[T], out: &mut [T]) {
        let w = &self.window;
        let (plane, o2) = (w.input_len(), w.output[2]);
        let lines_per_plane = w.output[0] * w.output[1];
        let spans: [Vec<Span>; 3] = std::array::from_fn(|d| self.spans(d));
        let inner: Vec<_> = (0..w.kernel[2]).map(|t| w.inner_span(t)).collect();
        let counts: Vec<T::C> = spans[2]
            .iter()
            .map(|s2| T::C::from_f64(self.count(*s2) as f64))
            .collect();
        let planar = w.input[0] == 1
            && w.output[0] == 1
            && spans[0][0].valid == 1
            && !matches!(self.kind, PoolKind::Lp { .. });
        let mut plane_counts = Kept::<Vec<T::C>>::shared("pooling counts");
        plane_counts.clear();
        if planar {
            plane_counts.extend((0..w.output[1]).flat_map(|r| {
                let outer = self.count(spans[0][0]) * self.count(spans[1][r]);
                spans[2]
                    .iter()
                    .map(move |s2| T::C::from_f64((outer * self.count(*s2)) as f64))
            }));
        }
        let geo = LineGeometry {
            spans: &spans,
            inner: &inner,
            counts: if planar { &plane_counts } else { &counts },
        };
        let pool =
            |src: &[T::C], part: Part, dst: &mut [T::C], scratch: &mut Scratch<T::C>| match self
                .kind
            {
                PoolKind::Max => vectorised(self, MaxOf, &geo, src, part, dst, scratch),
                PoolKind::Average => vectorised(self, MeanOf, &geo, src, part, dst, scratch),
                PoolKind::Lp { p } => {
                    if let Part::Line(l) = part {
                        self.line(LpOf(p), &geo, src, l, dst)
                    }
                }
            };
        let init = || {
            let mut kept = Kept::<(Vec<T::C>, Vec<T::C>, Scratch<T::C>)>::take("pooling rows");
            let (a, b, (c, d, e, f)) = &mut *kept;
            a.clear();
            b.clear();
            c.clear();
            d.clear();
            e.clear();
            f.clear();
            kept
        };
        if size_of::<T>() == size_of::<T::C>() && !planar {
            let work = o2 * w.kernel_len();
            for_each_row(out, o2, work, init, |kept, l, dst| {
                let (in_buf, out_buf, scratch) = &mut **kept;
                let p = l / lines_per_plane;
                let src = T::view(&x[p * plane..(p + 1) * plane], in_buf);
                let part = Part::Line(l % lines_per_plane);
                T::write(dst, out_buf, |dst| pool(src, part, dst, scratch));
            });
        } else {
            let outputs = w.output_len();
            let work = outputs * w.kernel_len();
            for_each_row(out, outputs, work, init, |kept, p, dst| {
                let (in_buf, out_buf, scratch) = &mut **kept;
                let src = T::view(&x[p * plane..(p + 1) * plane], in_buf);
                T::write(dst, out_buf, |dst| {
                    if planar {
                        pool(src, Part::Plane, dst, scratch);
                    } else {
                        for (l, d) in dst.chunks_exact_mut(o2).enumerate() {
                            pool(src, Part::Line(l), d, scratch);
                        }
                    }
                });
            });
        }
    }

    fn spans(&self, dim: usize) -> Vec<Span> {
        let w = &self.window;
        (0..w.output[dim])
            .map(|o| {
                let taps = w.valid_taps(dim, o);
                Span {
                    start: w.tap(dim, o, taps.start).unwrap_or(0),
                    valid: taps.len(),
                    padded: w.padded_taps(dim, o),
                }
            })
            .collect()
    }

    /// Output line `l` of a plane (`l` = outer index · output[1] + middle index), each tap
    /// updating the whole line (any reduction; Lp pooling uses it).
    fn line<C: Real, R: Reduction<C>>(
        &self,
        op: R,
        geo: &LineGeometry<'_, C>,
        src: &[C],
        l: usize,
        dst: &mut [C],
    ) {
        let w = &self.window;
        let [_, i1, i2] = w.input;
        let [d0, d1, _] = w.dilation;
        let s = w.stride[2];
        let (s0, s1) = (geo.spans[0][l / w.output[1]], geo.spans[1][l % w.output[1]]);
        dst.fill(op.start());
        for t0 in 0..s0.valid {
            let p = s0.start + t0 * d0;
            for t1 in 0..s1.valid {
                let start = (p * i1 + s1.start + t1 * d1) * i2;
                let row = &src[start..start + i2];
                for (range, first) in geo.inner {
                    let inside = &mut dst[range.clone()];
                    if s == 1 {
                        for (o, &v) in inside.iter_mut().zip(&row[*first..]) {
                            *o = op.step(*o, v);
                        }
                    } else {
                        for (j, o) in inside.iter_mut().enumerate() {
                            *o = op.step(*o, row[first + j * s]);
                        }
                    }
                }
            }
        }
        self.finish(op, s0, s1, geo.counts, dst);
    }

    /// The taps of a window along one dim that count towards an average.
    fn count(&self, span: Span) -> usize {
        if self.count_include_pad {
            span.padded
        } else {
            span.valid
        }
    }

    /// Applies the reduction's final step to a line whose outer spans are `s0` and `s1`.
    #[inline(always)]
    fn finish<C: Real, R: Reduction<C>>(
        &self,
        op: R,
        s0: Span,
        s1: Span,
        counts: &[C],
        dst: &mut [C],
    ) {
        let outer = C::from_f64((self.count(s0) * self.count(s1)) as f64);
        for (o, &c2) in dst.iter_mut().zip(counts) {
            *o = op.finish(*o, outer * c2);
        }
    }

    /// [`Pool::line`] for reductions whose partial results combine with `step` itself (max,
    /// sum): the window's valid input rows are first reduced into `row`, a copy of the input
    /// line with its padding (columns in padding hold the reduction's start), then each
    /// innermost tap reduces a strided view of `row` into the whole output line. Every loop
    /// runs over consecutive elements (stride 1 or 2 specialised), so it vectorises.
    #[inline(always)]
    fn rows_then_taps_body<C: Real, R: Reduction<C>, const SW: usize>(
        &self,
        op: R,
        geo: &LineGeometry<'_, C>,
        src: &[C],
        l: usize,
        dst: &mut [C],
        (row, _, rows, _): &mut Scratch<C>,
    ) {
        let w = &self.window;
        let [_, i1, i2] = w.input;
        let [d0, d1, d2] = w.dilation;
        let s = if SW == 0 { w.stride[2] } else { SW };
        let (o2, k2, pb) = (w.output[2], w.kernel[2], w.pad_begin[2]);
        let (s0, s1) = (geo.spans[0][l / w.output[1]], geo.spans[1][l % w.output[1]]);
        let pointwise = k2 == 1 && s == 1 && pb == 0 && o2 == i2;
        let width = o2 * s + (k2 - 1) * d2;
        let acc: &mut [C] = if pointwise {
            dst
        } else {
            row.clear();
            row.resize(width, op.start());
            row
        };
        let (lo, hi) = (pb.min(width), (pb + i2).min(width));
        let inside = &mut acc[lo..hi];
        let n = inside.len();
        rows.clear();
        for t0 in 0..s0.valid {
            let p = s0.start + t0 * d0;
            rows.extend((0..s1.valid).map(|t1| (p * i1 + s1.start + t1 * d1) * i2));
        }
        reduce_sources(op, inside, rows.len(), |r| {
            src[rows[r]..rows[r] + n].iter().copied()
        });
        if !pointwise {
            let acc = &row[..];
            reduce_sources(op, dst, k2, |k| {
                acc[k * d2..k * d2 + o2 * s].chunks_exact(s).map(|c| c[0])
            });
        }
        self.finish(op, s0, s1, geo.counts, dst);
    }

    /// A whole 1-D or 2-D plane for reductions that combine with `step` (max, sum): the
    /// input rows are reduced into the window rows of every output row, then the window
    /// columns into the outputs. When every window lies inside the input and its columns
    /// can be read in place (stride 1, or an idempotent reduction), the rows are read from
    /// the input itself; otherwise the input is first copied into a padded plane (padding
    /// holds the reduction's start and is written once per task: every plane of a layer
    /// has the same geometry). With stride 1 each step is one pass over the whole plane, so
    /// small planes (7×7, 14×14) cost little more than their elements; with a column stride
    /// of 2 (no dilation) the padded rows hold their even columns then their odd ones, so
    /// every tap reads consecutive elements; wider strides of an idempotent reduction
    /// reduce power-of-two column runs in place ([`doubled_columns`]).
    #[inline(always)]
    fn plane_body<C: Real, R: Reduction<C>, const SW: usize>(
        &self,
        op: R,
        geo: &LineGeometry<'_, C>,
        src: &[C],
        dst: &mut [C],
        (padded, rows, _, taps): &mut Scratch<C>,
    ) {
        let w = &self.window;
        let [_, ih, iw] = w.input;
        let [_, kh, kw] = w.kernel;
        let [_, sh, _] = w.stride;
        let sw = if SW == 0 { w.stride[2] } else { SW };
        let [_, dh, dw] = w.dilation;
        let [_, oh, ow] = w.output;
        let (pt, pl) = (w.pad_begin[1], w.pad_begin[2]);
        let start = op.start();
        let split = sw == 2 && dw == 1;
        let doubled = R::IDEMPOTENT && sw > 1 && !split;
        let reach_h = (oh - 1) * sh + (kh - 1) * dh + 1;
        let reach_w = (ow - 1) * sw + (kw - 1) * dw + 1;
        let direct = pt == 0 && pl == 0 && reach_h <= ih && reach_w <= iw && (sw == 1 || doubled);
        let (plane, width): (&[C], usize) = if direct {
            (src, iw)
        } else {
            let width = if doubled {
                reach_w
            } else {
                ow * sw + (kw - 1) * dw
            };
            let width = width.max(pl + iw);
            let height = reach_h.max(pt + ih);
            let half = width.div_ceil(2);
            let width = if split { 2 * half } else { width };
            if padded.len() != height * width {
                padded.clear();
                padded.resize(height * width, start);
            }
            for (y, line) in padded.chunks_exact_mut(width).enumerate().skip(pt).take(ih) {
                let row = &src[(y - pt) * iw..(y - pt + 1) * iw];
                if split {
                    deinterleave_row(line, half, pl, row);
                } else {
                    line[pl..pl + iw].copy_from_slice(row);
                }
            }
            (padded, width)
        };
        rows.truncate(oh * width);
        rows.resize(oh * width, start);
        if sh == 1 {
            let n = oh * width;
            reduce_sources(op, rows, kh, |k| {
                plane[k * dh * width..][..n].iter().copied()
            });
        } else {
            for (r, acc) in rows.chunks_exact_mut(width).enumerate() {
                reduce_sources(op, acc, kh, |k| {
                    plane[(r * sh + k * dh) * width..][..width].iter().copied()
                });
            }
        }
        if sw == 1 {
            let n = (oh - 1) * width + ow;
            taps.truncate(n);
            taps.resize(n, start);
            let rows = &rows[..];
            reduce_sources(op, taps, kw, |k| rows[k * dw..][..n].iter().copied());
            for (r, out) in dst.chunks_exact_mut(ow).enumerate() {
                out.copy_from_slice(&taps[r * width..r * width + ow]);
            }
        } else if split {
            let half = width / 2;
            for (acc, out) in rows.chunks_exact(width).zip(dst.chunks_exact_mut(ow)) {
                reduce_sources(op, out, kw, |k| {
                    acc[(k % 2) * half + k / 2..][..ow].iter().copied()
                });
            }
        } else if doubled {
            doubled_columns(op, rows, width, (kw, sw, dw), taps, dst);
        } else {
            for (acc, out) in rows.chunks_exact(width).zip(dst.chunks_exact_mut(ow)) {
                reduce_sources(op, out, kw, |k| {
                    acc[k * dw..k * dw + ow * sw].chunks_exact(sw).map(|c| c[0])
                });
            }
        }
        for (o, &c) in dst.iter_mut().zip(geo.counts) {
            *o = op.finish(*o, c);
        }
    }
}

/// The column step of an idempotent reduction over `rows` (rows of `width` reduced window
/// rows) into `dst` (rows of its own width). Doubling over all rows at once, alternating
/// between `rows` and `taps`, leaves at each position the reduction of the `P` taps starting
/// there (`P` the largest power of two ≤ the kernel width); each output is then the
/// reduction of the runs of `P` taps starting at its first and at its last `P` taps. Runs
/// reaching past a row's end only feed positions no output reads.
#[inline(always)]
fn doubled_columns<C: Real, R: Reduction<C>>(
    op: R,
    rows: &mut Vec<C>,
    width: usize,
    (kw, sw, dw): (usize, usize, usize),
    taps: &mut Vec<C>,
    dst: &mut [C],
) {
    let ow = dst.len() / (rows.len() / width);
    let (mut from, mut to) = (rows, taps);
    let mut run = 1;
    while 2 * run <= kw {
        let shift = run * dw;
        let n = from.len() - shift;
        to.clear();
        to.extend(
            from[..n]
                .iter()
                .zip(&from[shift..])
                .map(|(&a, &b)| op.step(a, b)),
        );
        std::mem::swap(&mut from, &mut to);
        run *= 2;
    }
    let last = (kw - run) * dw;
    for (r, out) in dst.chunks_exact_mut(ow).enumerate() {
        let acc = &from[r * width..];
        for (o, v) in out.iter_mut().enumerate() {
            *v = op.step(acc[o * sw], acc[o * sw + last]);
        }
    }
}

/// Which outputs a call of [`vectorised`] computes.
#[derive(Clone, Copy)]
enum Part {
    /// One output line (`l` = outer index · output[1] + middle index).
    Line(usize),
    /// A whole output plane of a 1-D or 2-D window.
    Plane,
}

/// Reduces `n` sources, each yielding one value per element of `acc`, into `acc`: the first
/// one to three in one pass that writes fresh values, the rest two per pass, so no pass is a
/// read-modify-write of one value (which compiles to masked stores rather than vector max).
#[inline(always)]
fn reduce_sources<C: Real, R: Reduction<C>, I: Iterator<Item = C>>(
    op: R,
    acc: &mut [C],
    n: usize,
    source: impl Fn(usize) -> I,
) {
    let first = if n % 2 == 1 { n.min(3) } else { n.min(2) };
    let start = op.start();
    match first {
        0 => acc.fill(start),
        1 => {
            for (a, x) in acc.iter_mut().zip(source(0)) {
                *a = op.step(start, x);
            }
        }
        2 => {
            for (a, (x, y)) in acc.iter_mut().zip(source(0).zip(source(1))) {
                *a = op.step(op.step(start, x), y);
            }
        }
        _ => {
            let sources = source(0).zip(source(1)).zip(source(2));
            for (a, ((x, y), z)) in acc.iter_mut().zip(sources) {
                *a = op.step(op.step(op.step(start, x), y), z);
            }
        }
    }
    for k in (first..n).step_by(2) {
        for (a, (x, y)) in acc.iter_mut().zip(source(k).zip(source(k + 1))) {
            *a = op.step(op.step(*a, x), y);
        }
    }
}

/// A pooling task's scratch for [`vectorised`]: a padded input line or plane, a plane's
/// reduced window rows, the offsets of the input rows a line's windows read, and a plane's
/// reduced window columns (stride 1).
type Scratch<C> = (Vec<C>, Vec<C>, Vec<usize>, Vec<C>);

/// [`Pool::rows_then_taps_body`] or [`Pool::plane_body`] with the innermost stride
/// specialised (1, 2, or read at run time) and compiled for the widest vector instructions
/// the CPU has.
fn vectorised<C: Real, R: Reduction<C>>(
    pool: &Pool,
    op: R,
    geo: &LineGeometry<'_, C>,
    src: &[C],
    part: Part,
    dst: &mut [C],
    row: &mut Scratch<C>,
) {
    macro_rules! versions {
        ($name:ident, $($feature:literal)?) => {
            $(#[target_feature(enable = $feature)])?
            fn $name<C: Real, R: Reduction<C>>(
                pool: &Pool,
                op: R,
                geo: &LineGeometry<'_, C>,
                src: &[C],
                part: Part,
                dst: &mut [C],
                row: &mut Scratch<C>,
            ) {
                match (part, pool.window.stride[2]) {
                    (Part::Line(l), 1) => pool.rows_then_taps_body::<C, R, 1>(op, geo, src, l, dst, row),
                    (Part::Line(l), 2) => pool.rows_then_taps_body::<C, R, 2>(op, geo, src, l, dst, row),
                    (Part::Line(l), _) => pool.rows_then_taps_body::<C, R, 0>(op, geo, src, l, dst, row),
                    (Part::Plane, 1) => pool.plane_body::<C, R, 1>(op, geo, src, dst, row),
                    (Part::Plane, 2) => pool.plane_body::<C, R, 2>(op, geo, src, dst, row),
                    (Part::Plane, _) => pool.plane_body::<C, R, 0>(op, geo, src, dst, row),
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
            return unsafe { v4(pool, op, geo, src, part, dst, row) };
        }
        if crate::simd::v3() {
            // SAFETY: `v3()` holds only when the CPU has AVX2 and FMA.
            return unsafe { v3(pool, op, geo, src, part, dst, row) };
        }
    }
    generic(pool, op, geo, src, part, dst, row)
}

/// What [`Pool::line`] needs of the window beyond the window itself: the spans of every
/// output along each dim, for each innermost tap the outputs it reads the input for,
/// and the count of taps along the innermost dim of every output that an average divides by.
struct LineGeometry<'a, C> {
    spans: &'a [Vec<Span>; 3],
    inner: &'a [(std::ops::Range<usize>, usize)],
    counts: &'a [C],
}
