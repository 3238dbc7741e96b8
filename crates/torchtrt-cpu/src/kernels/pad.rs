//! Pad: each output row is assembled from copy and fill segments computed once per call
//! from the per-dim source maps.

use torchtrt_core::layers::{Pad, PadMode, int_vector, resolve_pads};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use crate::dispatch::with_width;
use crate::parallel::for_each_row;
use crate::tensor_access::{
    check_arity, check_dtype, check_output, contiguous_strides, words, words_mut,
};

const WHAT: &str = "Pad";

struct PadKernel {
    mode: PadMode,
    dtype: DType,
}

pub(super) fn prepare(layer: &Pad, inputs: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(PadKernel {
        mode: layer.mode,
        dtype: inputs[0].dtype,
    }))
}

/// The output length of a dim of `d` elements padded by `(b, e)`, and the `[lo, lo + kept)`
/// input range left after cropping; an error when the pads do not fit or a repeating mode
/// has nothing to repeat.
fn dim_plan(mode: PadMode, d: usize, b: i64, e: i64) -> Result<(usize, i64, i64), String> {
    let d = d as i64;
    let lo = b.saturating_neg().max(0);
    let kept = d
        .saturating_sub(lo)
        .saturating_sub(e.saturating_neg().max(0));
    let len = d.checked_add(b).and_then(|n| n.checked_add(e));
    let Some(Ok(len)) = len.map(usize::try_from).filter(|_| kept >= 0) else {
        return Err(format!(
            "{WHAT}: pads ({b}, {e}) do not fit a dim of {d} elements"
        ));
    };
    if mode != PadMode::Constant && kept == 0 && len > 0 {
        return Err(format!(
            "{WHAT}: {mode:?} padding needs elements to repeat, but a dim has none"
        ));
    }
    Ok((len, lo, kept))
}

/// For each of the `len` output indices along a dim whose cropped input range is
/// `[lo, lo + kept)` and which gets `b` elements before, the input index it reads, or
/// `None` for the constant.
fn source_map(mode: PadMode, (len, lo, kept): (usize, i64, i64), b: i64) -> Vec<Option<usize>> {
    let first = b.max(0);
    (0..len as i64)
        .map(|i| {
            let j = i - first;
            if (0..kept).contains(&j) {
                return Some((lo + j) as usize);
            }
            if mode == PadMode::Constant || kept == 0 {
                return None;
            }
            let k = match mode {
                PadMode::Edge => j.clamp(0, kept - 1),
                PadMode::Wrap => j.rem_euclid(kept),
                _ if kept == 1 => 0,
                _ => {
                    let m = j.rem_euclid(2 * (kept - 1));
                    if m < kept { m } else { 2 * (kept - 1) - m }
                }
            };
            Some((lo + k) as usize)
        })
        .collect()
}

/// A stretch of an output row: `len` elements copied from input offset `src`, or filled
/// with the constant when `src` is `None`.
#[derive(Clone, Copy)]
struct Segment {
    len: usize,
    src: Option<usize>,
}

/// The row `map` merged into runs of consecutive sources and runs of the constant.
fn segments(map: &[Option<usize>]) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for &m in map {
        if let Some(last) = out.last_mut() {
            let extends = match (last.src, m) {
                (None, None) => true,
                (Some(s), Some(t)) => s + last.len == t,
                _ => false,
            };
            if extends {
                last.len += 1;
                continue;
            }
        }
        out.push(Segment { len: 1, src: m });
    }
    out
}

impl Kernel for PadKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 2..=4, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let err = |e: String| format!("{WHAT}: {e}");
        let pads = int_vector("the pads input", inputs[1]).map_err(err)?;
        let axes = inputs
            .get(3)
            .map(|a| int_vector("the axes input", a))
            .transpose()
            .map_err(err)?;
        let pads = resolve_pads(x.rank(), &pads, axes.as_deref()).map_err(err)?;
        let plans = x
            .shape()
            .iter()
            .zip(&pads)
            .map(|(&d, &(b, e))| dim_plan(self.mode, d, b, e))
            .collect::<Result<Vec<_>, _>>()?;
        let shape: Vec<usize> = plans.iter().map(|p| p.0).collect();
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &shape)?;
        let constant = match inputs.get(2) {
            Some(c) if c.numel() > 1 || c.dtype() != self.dtype => {
                return Err(format!(
                    "{WHAT}: the constant value must be a {} scalar, got {c}",
                    self.dtype
                ));
            }
            Some(c) => c.bytes(),
            None => &[],
        };
        if out.numel() == 0 {
            return Ok(());
        }
        let maps: Vec<_> = plans
            .into_iter()
            .zip(&pads)
            .map(|(plan, &(b, _))| source_map(self.mode, plan, b))
            .collect();
        with_width!(self.dtype, W => {
            let fill = match constant {
                [] => bytemuck::Zeroable::zeroed(),
                bytes => bytemuck::pod_read_unaligned::<W>(bytes),
            };
            pad(words::<W>(x)?, x.shape(), &maps, fill, words_mut::<W>(out)?);
            Ok(())
        })
    }
}

/// Writes the padded `x` (of `in_shape`) into `out`, whose dim `d` reads `maps[d]`.
fn pad<W: Copy + Send + Sync>(
    x: &[W],
    in_shape: &[usize],
    maps: &[Vec<Option<usize>>],
    fill: W,
    out: &mut [W],
) {
    let Some((last, outer)) = maps.split_last() else {
        out.copy_from_slice(x);
        return;
    };
    let strides = contiguous_strides(in_shape);
    let row = segments(last);
    for_each_row(
        out,
        last.len(),
        last.len(),
        || (),
        |_, r, dst| {
            let mut rest = r;
            let mut base = Some(0);
            for (d, map) in outer.iter().enumerate().rev() {
                let i = rest % map.len();
                rest /= map.len();
                base = base.zip(map[i]).map(|(b, s)| b + s * strides[d]);
            }
            let Some(base) = base else {
                dst.fill(fill);
                return;
            };
            let mut at = 0;
            for seg in &row {
                let part = &mut dst[at..at + seg.len];
                match seg.src {
                    Some(s) => part.copy_from_slice(&x[base + s..base + s + seg.len]),
                    None => part.fill(fill),
                }
                at += seg.len;
            }
        },
    );
}
