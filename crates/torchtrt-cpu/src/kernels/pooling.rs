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

impl Pool {
    /// Pools every (image, channel) plane, planes in parallel.
    fn run<T: FloatElem>(&self, x: &[T], out: &mut [T]) {
        let (plane, outputs) = (self.window.input_len(), self.window.output_len());
        let work = outputs * self.window.kernel_len();
        let init = || (Vec::new(), Vec::new());
        for_each_row(out, outputs, work, init, |(in_buf, out_buf), p, dst| {
            let src = T::view(&x[p * plane..(p + 1) * plane], in_buf);
            T::write(dst, out_buf, |dst| self.plane(src, dst));
        });
    }

    fn plane<C: Real>(&self, src: &[C], dst: &mut [C]) {
        let w = &self.window;
        let [o0, o1, o2] = w.output;
        let [_, i1, i2] = w.input;
        let mut out = dst.iter_mut();
        for a in 0..o0 {
            let (r0, n0) = (w.valid_taps(0, a), w.padded_taps(0, a));
            for b in 0..o1 {
                let (r1, n1) = (w.valid_taps(1, b), w.padded_taps(1, b));
                for c in 0..o2 {
                    let (r2, n2) = (w.valid_taps(2, c), w.padded_taps(2, c));
                    let mut acc = self.start::<C>();
                    for t0 in r0.clone() {
                        let p = w.coord(0, a, t0) as usize;
                        for t1 in r1.clone() {
                            let row = (p * i1 + w.coord(1, b, t1) as usize) * i2;
                            for t2 in r2.clone() {
                                acc = self.step(acc, src[row + w.coord(2, c, t2) as usize]);
                            }
                        }
                    }
                    let valid = r0.len() * r1.len() * r2.len();
                    if let Some(o) = out.next() {
                        *o = self.finish(acc, valid, n0 * n1 * n2);
                    }
                }
            }
        }
    }

    fn start<C: Real>(&self) -> C {
        match self.kind {
            PoolKind::Max => C::NEG_INFINITY,
            PoolKind::Average | PoolKind::Lp { .. } => C::ZERO,
        }
    }

    #[inline(always)]
    fn step<C: Real>(&self, acc: C, v: C) -> C {
        match self.kind {
            PoolKind::Max if v > acc => v,
            PoolKind::Max => acc,
            PoolKind::Average => acc + v,
            PoolKind::Lp { p: 1 } => acc + v.abs(),
            PoolKind::Lp { p: 2 } => acc + v * v,
            PoolKind::Lp { p } => acc + v.abs().powf(C::from_f64(p as f64)),
        }
    }

    /// The result of a window with `valid` input taps and `padded` taps inside the padded
    /// extent; an average over no taps is 0.
    fn finish<C: Real>(&self, acc: C, valid: usize, padded: usize) -> C {
        let count = if self.count_include_pad {
            padded
        } else {
            valid
        };
        match self.kind {
            PoolKind::Max => acc,
            PoolKind::Average if count == 0 => C::ZERO,
            PoolKind::Average => acc / C::from_f64(count as f64),
            PoolKind::Lp { p: 1 } => acc,
            PoolKind::Lp { p: 2 } => acc.sqrt(),
            PoolKind::Lp { p } => acc.powf(C::from_f64(1.0 / p as f64)),
        }
    }
}
