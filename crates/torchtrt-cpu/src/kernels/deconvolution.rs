//! N-d transposed convolution (1-D to 3-D): per image and group, one gemm `wᵀ · x` into
//! columns, then col2im scatters the columns into the output.

use rayon::prelude::*;
use torchtrt_core::layers::Deconvolution;
use torchtrt_core::plugin_api::{DType, DimExpr};
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_float;
use crate::linalg::{GemmElem, MatRef, gemm};
use crate::scalar::{FloatElem, Real};
use crate::tensor_access::{check_bias, check_output, elems, elems_mut, weighted_inputs};

const WHAT: &str = "Deconvolution";

struct DeconvKernel {
    layer: Deconvolution,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Deconvolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(DeconvKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// Sizes of one call; spatial arrays hold three dims, 1-D and 2-D padded with leading 1s.
struct Geom {
    batch: usize,
    channels: usize,
    out_channels: usize,
    groups: usize,
    input: [usize; 3],
    kernel: [usize; 3],
    output: [usize; 3],
    stride: [usize; 3],
    dilation: [usize; 3],
    pad_begin: [usize; 3],
}

impl Geom {
    fn new(layer: &Deconvolution, x: &[usize], w: &[usize]) -> Result<Geom, String> {
        let spatial = x.len().saturating_sub(2);
        if !(1..=3).contains(&spatial) || w.len() != x.len() {
            return Err(format!(
                "{WHAT} needs x [N,C,1-3 spatial dims] and w of the same rank, got {x:?} and {w:?}"
            ));
        }
        layer
            .check_params(spatial)
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let groups = layer.groups as usize;
        if x[1] != w[0] || !w[0].is_multiple_of(groups) {
            return Err(format!(
                "{WHAT}: x {x:?} and w {w:?} do not agree with {groups} groups"
            ));
        }
        let lead = 3 - spatial;
        let pad = |v: &[i64], fill: usize| -> [usize; 3] {
            std::array::from_fn(|d| d.checked_sub(lead).map_or(fill, |i| v[i] as usize))
        };
        let mut geom = Geom {
            batch: x[0],
            channels: x[1],
            out_channels: w[1] * groups,
            groups,
            input: std::array::from_fn(|d| d.checked_sub(lead).map_or(1, |i| x[2 + i])),
            kernel: std::array::from_fn(|d| d.checked_sub(lead).map_or(1, |i| w[2 + i])),
            output: [1; 3],
            stride: pad(&layer.strides, 1),
            dilation: pad(&layer.dilations, 1),
            pad_begin: pad(&layer.pads_begin, 0),
        };
        for i in 0..spatial {
            let extent = layer
                .output_extent(i, &DimExpr::Const(x[2 + i] as i64), w[2 + i] as i64)
                .and_then(|e| e.as_const())
                .filter(|&v| v >= 1 && x[2 + i] >= 1)
                .ok_or_else(|| {
                    format!("{WHAT}: spatial dim {i} of {x:?} gives an empty or overflowing output")
                })?;
            geom.output[lead + i] = extent as usize;
        }
        Ok(geom)
    }

    fn output_shape(&self, spatial: usize) -> Vec<usize> {
        let mut shape = vec![self.batch, self.out_channels];
        shape.extend_from_slice(&self.output[3 - spatial..]);
        shape
    }

    fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    fn input_len(&self) -> usize {
        self.input.iter().product()
    }

    fn output_len(&self) -> usize {
        self.output.iter().product()
    }
}

impl Kernel for DeconvKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        let (x, w, bias) = weighted_inputs(WHAT, inputs, outputs, self.dtype)?;
        let geom = Geom::new(&self.layer, x.shape(), w.shape())?;
        check_bias(WHAT, bias, geom.out_channels)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &geom.output_shape(x.rank() - 2))?;
        with_float!(self.dtype, WHAT, T => {
            let (mut xb, mut wb, mut bb) = (Vec::new(), Vec::new(), Vec::new());
            let xc = T::view(elems::<T>(x)?, &mut xb);
            let wc = T::view(elems::<T>(w)?, &mut wb);
            let bc = bias.map(|b| elems::<T>(b).map(|b| T::view(b, &mut bb))).transpose()?;
            let mut result = Ok(());
            T::write(elems_mut(out)?, &mut Vec::new(), |oc| {
                result = deconv(&geom, xc, wc, bc, oc);
            });
            result
        })
    }
}

/// One task per (image, group), each owning that group's output channels of the image.
fn deconv<C: Real + GemmElem>(
    geom: &Geom,
    x: &[C],
    w: &[C],
    bias: Option<&[C]>,
    out: &mut [C],
) -> Result<(), String> {
    let groups = geom.groups;
    let (cg, mg) = (geom.channels / groups, geom.out_channels / groups);
    let (ilen, olen, taps) = (geom.input_len(), geom.output_len(), geom.taps());
    let task_len = mg * olen;
    if task_len == 0 {
        return Ok(());
    }
    let task = |col: &mut Vec<C>, t: usize, dst: &mut [C], parallel: bool| {
        let (image, group) = (t / groups, t % groups);
        let start = (image * geom.channels + group * cg) * ilen;
        let rhs = MatRef::row_major(&x[start..start + cg * ilen], cg, ilen);
        let wg = &w[group * cg * mg * taps..(group + 1) * cg * mg * taps];
        let lhs = MatRef {
            data: wg,
            rows: mg * taps,
            cols: cg,
            row_stride: 1,
            col_stride: mg * taps,
        };
        col.resize(mg * taps * ilen, <C as Real>::ZERO);
        gemm(col, lhs, rhs, false, parallel)?;
        let fill = |m: usize, plane: &mut [C]| {
            plane.fill(bias.map_or(<C as Real>::ZERO, |b| b[group * mg + m]));
            col2im(geom, &col[m * taps * ilen..(m + 1) * taps * ilen], plane);
        };
        if parallel {
            dst.par_chunks_mut(olen)
                .enumerate()
                .for_each(|(m, plane)| fill(m, plane));
        } else {
            for (m, plane) in dst.chunks_mut(olen).enumerate() {
                fill(m, plane);
            }
        }
        Ok(())
    };
    let tasks = geom.batch * groups;
    if tasks >= rayon::current_num_threads() && tasks > 1 {
        out.par_chunks_mut(task_len)
            .enumerate()
            .try_for_each_init(Vec::new, |col, (t, dst)| task(col, t, dst, false))
    } else {
        let mut col = Vec::new();
        out.chunks_mut(task_len)
            .enumerate()
            .try_for_each(|(t, dst)| task(&mut col, t, dst, true))
    }
}

/// Adds the `taps × input_len` columns of one output channel into its output `plane`: the
/// column of tap `(t0, t1, t2)` at input `(a, b, c)` lands on output
/// `(a·s + t0·d − p, …)` when that lies inside the plane.
fn col2im<C: Real>(geom: &Geom, col: &[C], plane: &mut [C]) {
    let [k0, k1, k2] = geom.kernel;
    let [i0, i1, i2] = geom.input;
    let [_, o1, o2] = geom.output;
    let ilen = geom.input_len();
    let coord = |d: usize, i: usize, t: usize| -> Option<usize> {
        let c = i as i128 * geom.stride[d] as i128 + t as i128 * geom.dilation[d] as i128
            - geom.pad_begin[d] as i128;
        (c >= 0 && c < geom.output[d] as i128).then_some(c as usize)
    };
    let mut rows = col.chunks_exact(ilen);
    for t0 in 0..k0 {
        for t1 in 0..k1 {
            for t2 in 0..k2 {
                let Some(row) = rows.next() else { return };
                let (lo, hi, first) = line_range(geom, t2);
                for a in 0..i0 {
                    let Some(p) = coord(0, a, t0) else { continue };
                    for b in 0..i1 {
                        let Some(q) = coord(1, b, t1) else { continue };
                        let src = &row[(a * i1 + b) * i2 + lo..(a * i1 + b) * i2 + hi];
                        let line = &mut plane[(p * o1 + q) * o2..(p * o1 + q + 1) * o2];
                        let s = geom.stride[2];
                        if s == 1 {
                            for (o, &v) in line[first..first + src.len()].iter_mut().zip(src) {
                                *o = *o + v;
                            }
                        } else {
                            for (j, &v) in src.iter().enumerate() {
                                let o = &mut line[first + j * s];
                                *o = *o + v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// For innermost tap `t`: the inputs `lo..hi` whose outputs fall inside the line, and the
/// output position of input `lo` (in i128, so no parameters overflow).
fn line_range(geom: &Geom, t: usize) -> (usize, usize, usize) {
    let (s, n) = (geom.stride[2] as i128, geom.input[2] as i128);
    let width = geom.output[2] as i128;
    let offset = t as i128 * geom.dilation[2] as i128 - geom.pad_begin[2] as i128;
    let lo = ((-offset).max(0) + s - 1).div_euclid(s).min(n);
    let hi = ((width - offset).max(0) + s - 1)
        .div_euclid(s)
        .min(n)
        .max(lo);
    let first = if lo < hi { lo * s + offset } else { 0 };
    (lo as usize, hi as usize, first as usize)
}
