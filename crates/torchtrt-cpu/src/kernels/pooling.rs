//! Max, average and Lp pooling over 1 to 3 spatial dims.

use torchtrt_core::layers::{PoolKind, Pooling};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_float;
use crate::linalg::{Window, WindowParams};
use crate::parallel::for_each_row;
use crate::scalar::{FloatElem, Real};
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
        let pool = Pool {
            window,
            kind: l.kind,
            count_include_pad: l.count_include_pad,
        };
        with_float!(self.dtype, WHAT, T => {
            pool.run::<T>(elems(x)?, elems_mut(out)?);
            Ok(())
        })
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
    fn start(self) -> C;
    fn step(self, acc: C, v: C) -> C;
    fn finish(self, acc: C, count: usize) -> C;
}

#[derive(Clone, Copy)]
struct MaxOf;
#[derive(Clone, Copy)]
struct MeanOf;
#[derive(Clone, Copy)]
struct LpOf(i64);

impl<C: Real> Reduction<C> for MaxOf {
    fn start(self) -> C {
        C::NEG_INFINITY
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        if v > acc { v } else { acc }
    }
    fn finish(self, acc: C, _: usize) -> C {
        acc
    }
}

impl<C: Real> Reduction<C> for MeanOf {
    fn start(self) -> C {
        C::ZERO
    }
    #[inline(always)]
    fn step(self, acc: C, v: C) -> C {
        acc + v
    }
    fn finish(self, acc: C, count: usize) -> C {
        if count == 0 {
            C::ZERO
        } else {
            acc / C::from_f64(count as f64)
        }
    }
}

impl<C: Real> Reduction<C> for LpOf {
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
    fn finish(self, acc: C, _: usize) -> C {
        match self.0 {
            1 => acc,
            2 => acc.sqrt(),
            p => acc.powf(C::from_f64(1.0 / p as f64)),
        }
    }
}

impl Pool {
    /// Pools one output line (the innermost dim) at a time, lines in parallel; each tap
    /// updates a whole line, so the inner loops run over consecutive outputs. Types computed
    /// in a wider type are converted a plane per task.
    fn run<T: FloatElem>(&self, x: &[T], out: &mut [T]) {
        let w = &self.window;
        let (plane, o2) = (w.input_len(), w.output[2]);
        let lines_per_plane = w.output[0] * w.output[1];
        let spans: [Vec<Span>; 3] = std::array::from_fn(|d| self.spans(d));
        let inner: Vec<_> = (0..w.kernel[2]).map(|t| w.inner_span(t)).collect();
        let geo = LineGeometry {
            spans: &spans,
            inner: &inner,
        };
        let line = |src: &[T::C], l: usize, dst: &mut [T::C]| match self.kind {
            PoolKind::Max => self.line(MaxOf, &geo, src, l, dst),
            PoolKind::Average => self.line(MeanOf, &geo, src, l, dst),
            PoolKind::Lp { p } => self.line(LpOf(p), &geo, src, l, dst),
        };
        let init = || (Vec::new(), Vec::new());
        if size_of::<T>() == size_of::<T::C>() {
            let work = o2 * w.kernel_len();
            for_each_row(out, o2, work, init, |(in_buf, out_buf), l, dst| {
                let p = l / lines_per_plane;
                let src = T::view(&x[p * plane..(p + 1) * plane], in_buf);
                T::write(dst, out_buf, |dst| line(src, l % lines_per_plane, dst));
            });
        } else {
            let outputs = w.output_len();
            let work = outputs * w.kernel_len();
            for_each_row(out, outputs, work, init, |(in_buf, out_buf), p, dst| {
                let src = T::view(&x[p * plane..(p + 1) * plane], in_buf);
                T::write(dst, out_buf, |dst| {
                    for (l, d) in dst.chunks_exact_mut(o2).enumerate() {
                        line(src, l, d);
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

    /// Output line `l` of a plane (`l` = outer index · output[1] + middle index).
    fn line<C: Real, R: Reduction<C>>(
        &self,
        op: R,
        geo: &LineGeometry<'_>,
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
        for (o, s2) in dst.iter_mut().zip(&geo.spans[2]) {
            let count = if self.count_include_pad {
                s0.padded * s1.padded * s2.padded
            } else {
                s0.valid * s1.valid * s2.valid
            };
            *o = op.finish(*o, count);
        }
    }
}

/// What [`Pool::line`] needs of the window beyond the window itself: the spans of every
/// output along each dim, and for each innermost tap the outputs it reads the input for.
struct LineGeometry<'a> {
    spans: &'a [Vec<Span>; 3],
    inner: &'a [(std::ops::Range<usize>, usize)],
}
