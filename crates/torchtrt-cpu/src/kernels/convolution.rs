//! N-d convolution (1-D to 3-D) with groups, strides, dilations and padding: im2col per
//! group, then one gemm per group and image.

use rayon::prelude::*;
use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::conv_direct::conv_direct;
use crate::dispatch::with_float;
use crate::linalg::{GemmElem, MatRef, Window, WindowParams, gemm, im2col, via_f32};
use crate::tensor_access::{check_arity, check_dtype, check_output, elems, elems_mut};

const WHAT: &str = "Convolution";

struct ConvKernel {
    layer: Convolution,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &Convolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(ConvKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

/// Sizes of one convolution call.
pub(super) struct ConvGeom {
    /// Images.
    pub(super) batch: usize,
    /// Input channels.
    pub(super) channels: usize,
    /// Output channels.
    pub(super) out_channels: usize,
    /// Groups.
    pub(super) groups: usize,
    /// The sliding window over the spatial dims.
    pub(super) window: Window,
}

impl ConvGeom {
    fn new(layer: &Convolution, x: &[usize], w: &[usize]) -> Result<ConvGeom, String> {
        if x.len() < 3 || w.len() != x.len() {
            return Err(format!(
                "{WHAT} needs x [N,C,spatial…] and w of the same rank, got {x:?} and {w:?}"
            ));
        }
        let groups = usize::try_from(layer.groups)
            .ok()
            .filter(|&g| g > 0)
            .ok_or_else(|| format!("{WHAT}: groups {} must be positive", layer.groups))?;
        let (out_channels, group_channels) = (w[0], w[1]);
        if out_channels % groups != 0 || x[1] != group_channels * groups {
            return Err(format!(
                "{WHAT}: x {x:?} and w {w:?} do not agree with {groups} groups"
            ));
        }
        let kernel: Vec<i64> = w[2..].iter().map(|&k| k as i64).collect();
        let params = WindowParams {
            kernel: &kernel,
            strides: &layer.strides,
            dilations: &layer.dilations,
            pads_begin: &layer.pads_begin,
            pads_end: &layer.pads_end,
            ceil_mode: false,
        };
        let window = Window::new(&x[2..], &params).map_err(|e| format!("{WHAT}: {e}"))?;
        Ok(ConvGeom {
            batch: x[0],
            channels: x[1],
            out_channels,
            groups,
            window,
        })
    }

    fn output_shape(&self, spatial: usize) -> Vec<usize> {
        let mut shape = vec![self.batch, self.out_channels];
        shape.extend_from_slice(self.window.output_dims(spatial));
        shape
    }
}

impl Kernel for ConvKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=3, 1)?;
        for t in inputs {
            check_dtype(WHAT, t, self.dtype)?;
        }
        let (x, w, bias) = (inputs[0], inputs[1], inputs.get(2).copied());
        let geom = ConvGeom::new(&self.layer, x.shape(), w.shape())?;
        if let Some(b) = bias
            && b.shape() != [geom.out_channels]
        {
            return Err(format!(
                "{WHAT}: bias must be [{}], got {b}",
                geom.out_channels
            ));
        }
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &geom.output_shape(x.rank() - 2))?;
        if geom.groups > 1 && geom.channels == geom.groups {
            return with_float!(self.dtype, WHAT, T => {
                let bias = bias.map(elems::<T>).transpose()?;
                conv_direct::<T>(&geom, elems(x)?, elems(w)?, bias, elems_mut(out)?);
                Ok(())
            });
        }
        match self.dtype {
            DType::F32 => conv::<f32>(
                &geom,
                elems(x)?,
                elems(w)?,
                bias.map(elems).transpose()?,
                elems_mut(out)?,
            ),
            DType::F64 => conv::<f64>(
                &geom,
                elems(x)?,
                elems(w)?,
                bias.map(elems).transpose()?,
                elems_mut(out)?,
            ),
            DType::F16 => conv::<half::f16>(
                &geom,
                elems(x)?,
                elems(w)?,
                bias.map(elems).transpose()?,
                elems_mut(out)?,
            ),
            DType::BF16 => {
                let bias: Vec<f32> = match bias {
                    Some(b) => elems::<half::bf16>(b)?.iter().map(|v| v.to_f32()).collect(),
                    None => Vec::new(),
                };
                let bias = (!bias.is_empty()).then_some(bias.as_slice());
                via_f32([elems(x)?, elems(w)?], elems_mut(out)?, |[x, w], out| {
                    conv::<f32>(&geom, x, w, bias, out)
                })
            }
            other => Err(format!("{WHAT} has no CPU kernel for {other}")),
        }
    }
}

/// Runs the convolution: one task per (image, group), each an im2col and a gemm. Tasks run
/// in parallel when there are enough of them, else one at a time with a parallel gemm.
fn conv<G: GemmElem>(
    geom: &ConvGeom,
    x: &[G],
    w: &[G],
    bias: Option<&[G]>,
    out: &mut [G],
) -> Result<(), String> {
    let win = &geom.window;
    let groups = geom.groups;
    let (cg, mg) = (geom.channels / groups, geom.out_channels / groups);
    let (plane, outputs, taps) = (win.input_len(), win.output_len(), cg * win.kernel_len());
    let task_len = mg * outputs;
    if task_len == 0 {
        return Ok(());
    }
    let pointwise = win.is_pointwise();
    let task = |col: &mut Vec<G>, t: usize, dst: &mut [G], parallel: bool| {
        let (image, group) = (t / groups, t % groups);
        let start = (image * geom.channels + group * cg) * plane;
        let xg = &x[start..start + cg * plane];
        let rhs = if pointwise {
            MatRef::row_major(xg, cg, outputs)
        } else {
            col.resize(taps * outputs, G::ZERO);
            if parallel {
                let per_channel = win.kernel_len() * outputs;
                col.par_chunks_mut(per_channel)
                    .zip(xg.par_chunks(plane))
                    .for_each(|(rows, src)| im2col(src, 1, win, G::ZERO, rows));
            } else {
                im2col(xg, cg, win, G::ZERO, col);
            }
            MatRef::row_major(col.as_slice(), taps, outputs)
        };
        let lhs = MatRef::row_major(&w[group * mg * taps..(group + 1) * mg * taps], mg, taps);
        if let Some(bias) = bias {
            for (row, &b) in dst.chunks_exact_mut(outputs).zip(&bias[group * mg..]) {
                row.fill(b);
            }
        }
        gemm(dst, lhs, rhs, bias.is_some(), parallel)
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
