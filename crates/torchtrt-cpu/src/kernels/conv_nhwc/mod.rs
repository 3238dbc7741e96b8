//! Channels-last convolutions ([`Convolution::channels_last`]) on the CPU. Three kinds run
//! natively, and the CPU backend asks the builder for channels-last edges around them
//! ([`channels_last`]): 1×1 layers, whose channels-last form is a product of the positions'
//! rows of channels with the packed weights ([`pointwise`]), depthwise layers, which run
//! with the channels along the vector lanes ([`depthwise`]), and layers of a few input
//! channels (stems), computed with their output channels along the lanes ([`stem`]). ONNX
//! Runtime's CPU provider runs such networks in its own channel-blocked layout for the same
//! reason: the channels-first kernels of small planes leave vector lanes idle or gather
//! their inputs.
//! Any other channels-last layer (a GPU engine's layer falling back to the host) runs the
//! channels-first kernel between transposes ([`transposed`]).

mod depthwise;
mod pointwise;
mod stem;
mod transposed;

pub(crate) use transposed::around as channels_first_around;

use torchtrt_core::layers::Convolution;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{ChannelsLast, InferInput, Kernel, Tensor};

use rayon::prelude::*;

use crate::linalg::{Epilogue, Window, WindowParams};
use crate::tensor_access::{check_bias, check_output, elems};

const WHAT: &str = "Convolution";

/// Most input channels of a layer that runs [`Native::Stem`].
const STEM_CHANNELS: usize = 4;
/// Multiply-adds below which a windowed layer runs on one thread.
const SERIAL_WORK: usize = 1 << 16;

/// A channels-last layer the CPU runs natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Native {
    /// 1×1 taps, stride 1, no padding, one group.
    Pointwise,
    /// One filter per channel.
    Depthwise,
    /// One group of at most [`STEM_CHANNELS`] input channels.
    Stem,
}

/// How `layer` with f32 input and constant weights `w` runs natively channels last, if it
/// does: a 2-D layer with taps and a fusable activation on a CPU with AVX-512.
fn native(layer: &Convolution, dtype: DType, w: Option<&Tensor>) -> Option<Native> {
    let w = w.filter(|w| w.dtype() == DType::F32)?;
    let &[m, group_channels, kh, kw] = w.shape() else {
        return None;
    };
    if dtype != DType::F32
        || !crate::simd::v4()
        || Epilogue::of(layer.activation).is_none()
        || kh == 0
        || kw == 0
    {
        return None;
    }
    let unit = |v: &[i64], one: i64| v.iter().all(|&x| x == one);
    let pointwise = layer.groups == 1
        && (kh, kw) == (1, 1)
        && unit(&layer.strides, 1)
        && unit(&layer.pads_begin, 0)
        && unit(&layer.pads_end, 0);
    let depthwise = group_channels == 1 && m > 1 && usize::try_from(layer.groups) == Ok(m);
    let stem = layer.groups == 1 && group_channels <= STEM_CHANNELS;
    match (pointwise, depthwise, stem) {
        (true, ..) => Some(Native::Pointwise),
        (_, true, _) => Some(Native::Depthwise),
        (.., true) => Some(Native::Stem),
        _ => None,
    }
}

/// How the CPU runs `layer` (channels first, over `inputs`) channels last: depthwise layers
/// [`ChannelsLast::Faster`] (channels first, small planes gather their inputs channel-
/// interleaved, and large ones read each input row once per kernel row), 1×1 layers and
/// those of few input channels [`ChannelsLast::Either`] (a product either way), anything
/// else not at all.
pub(crate) fn channels_last(layer: &Convolution, inputs: &[InferInput<'_>]) -> ChannelsLast {
    let w = inputs.get(1).and_then(|w| w.value);
    match inputs.first().and_then(|x| native(layer, x.dtype, w)) {
        Some(Native::Depthwise) => ChannelsLast::Faster,
        Some(Native::Pointwise | Native::Stem) => ChannelsLast::Either,
        None => ChannelsLast::No,
    }
}

pub(super) fn prepare(
    layer: &Convolution,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    let x = inputs.first().ok_or_else(|| format!("{WHAT}: no input"))?;
    let w = inputs.get(1).and_then(|w| w.value);
    match (native(layer, x.dtype, w), w) {
        (Some(Native::Pointwise), Some(w)) => pointwise::prepare(layer, w),
        (Some(Native::Depthwise), Some(w)) => depthwise::prepare(layer, w),
        (Some(Native::Stem), Some(w)) => stem::prepare(layer, w),
        _ => transposed::prepare(layer, inputs),
    }
}

/// A native layer's operands, checked but for the shapes: `x`, the bias and the residual
/// when given (each f32), and the output.
struct Operands<'a> {
    x: &'a Tensor,
    bias: Option<&'a [f32]>,
    residual: Option<&'a [f32]>,
    y: &'a mut Tensor,
}

impl<'a> Operands<'a> {
    /// The operands of `inputs` and `outputs`, the output of `shape` computed from `x`,
    /// a bias of `channels` values, and a residual of the output's shape.
    fn new(
        inputs: &[&'a Tensor],
        outputs: &'a mut [Tensor],
        channels: usize,
        shape: impl FnOnce(&Tensor) -> Result<Vec<usize>, String>,
    ) -> Result<Operands<'a>, String> {
        let (&[x, _, ref rest @ ..], [y]) = (inputs, outputs) else {
            return Err(format!(
                "{WHAT}: x, w (and a bias and residual) in, one output out; got {} inputs",
                inputs.len()
            ));
        };
        let shape = shape(x)?;
        let (bias, residual) = (rest.first().copied(), rest.get(1).copied());
        check_bias(WHAT, bias, channels)?;
        check_output(WHAT, y, DType::F32, &shape)?;
        if let Some(r) = residual.filter(|r| r.dtype() != DType::F32 || r.shape() != shape) {
            return Err(format!("{WHAT}: the residual {r} must be f32{shape:?}"));
        }
        Ok(Operands {
            x,
            bias: bias.map(elems::<f32>).transpose()?,
            residual: residual.map(elems::<f32>).transpose()?,
            y,
        })
    }
}

/// The fused activation of `layer` ([`native`] has checked that it fuses).
fn epilogue(layer: &Convolution) -> Result<Epilogue, String> {
    Epilogue::of(layer.activation)
        .ok_or_else(|| format!("{WHAT}: cannot fuse {:?}", layer.activation))
}

/// The operands of a windowed layer (`kernel` taps of `layer`) with an `[N, H, W, C]` f32
/// input of `channels` channels, and its window: the output is `[N, OH, OW, out_channels]`.
fn windowed<'a>(
    layer: &Convolution,
    kernel: [usize; 2],
    inputs: &[&'a Tensor],
    outputs: &'a mut [Tensor],
    channels: usize,
    out_channels: usize,
) -> Result<(Operands<'a>, Window), String> {
    let mut window = None;
    let op = Operands::new(inputs, outputs, out_channels, |x| {
        let &[n, h, w, xc] = x.shape() else {
            return Err(format!("{WHAT}: x {x} must be [N, H, W, C]"));
        };
        if xc != channels || x.dtype() != DType::F32 {
            return Err(format!(
                "{WHAT}: x {x} must be f32 with {channels} channels last"
            ));
        }
        let taps = kernel.map(|k| k as i64);
        let params = WindowParams {
            kernel: &taps,
            strides: &layer.strides,
            dilations: &layer.dilations,
            pads_begin: &layer.pads_begin,
            pads_end: &layer.pads_end,
            ceil_mode: false,
        };
        let win = Window::new(&[h, w], &params).map_err(|e| format!("{WHAT}: {e}"))?;
        let shape = vec![n, win.output[1], win.output[2], out_channels];
        window = Some(win);
        Ok(shape)
    })?;
    Ok((op, window.ok_or(WHAT)?))
}

/// Runs `unit` on each of `units` units of work, split into a few tasks per worker, or on
/// this thread when the layer's `work` (multiply-adds) is below [`SERIAL_WORK`].
fn for_each_unit(units: usize, work: usize, unit: impl Fn(usize) + Sync) {
    let tasks = if work < SERIAL_WORK {
        1
    } else {
        units.min(rayon::current_num_threads() * 4)
    };
    let task = |t: usize| (units * t / tasks..units * (t + 1) / tasks).for_each(&unit);
    if tasks > 1 {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        (0..tasks).for_each(task);
    }
}
