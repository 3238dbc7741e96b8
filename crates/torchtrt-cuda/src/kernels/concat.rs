//! `Concat` layers on any dtype: each input is a block of rows copied into its columns of
//! the output (one strided copy per input, widened to 16-byte elements when aligned).

use torchtrt_core::layers::{InferInput, LayerKind, normalize_axis};
use torchtrt_plugin_api::DeviceTensor;

use super::copy::{Copier, byte_offset};
use super::layout::Walk;
use super::operands::dims;
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "Concat";

/// Prepares a `Concat` layer.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Concat(l) = layer else {
        return None;
    };
    let rank = inputs.first()?.shape.len();
    Some((|| {
        let axis = normalize_axis(l.axis, rank).map_err(|e| format!("{WHAT}: {e}"))?;
        let copier = Copier::new(WHAT, ctx)?;
        Ok(Box::new(ConcatKernel { axis, copier }) as Box<dyn DeviceKernel>)
    })())
}

struct ConcatKernel {
    axis: usize,
    copier: Copier,
}

impl DeviceKernel for ConcatKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let [o] = outputs else {
            return Err(format!("{WHAT} has one output, got {}", outputs.len()));
        };
        let out = dims(&o.desc)?;
        let elem = o.desc.dtype.size();
        let axis = self.axis;
        if inputs.is_empty() || axis >= out.len() {
            return Err(format!(
                "{WHAT}: axis {axis} of {out:?} with {} inputs",
                inputs.len()
            ));
        }
        let outer: usize = out[..axis].iter().product();
        let inner: usize = out[axis + 1..].iter().product();
        let row = out[axis] * inner;
        let mut at = 0usize;
        for (i, x) in inputs.iter().enumerate() {
            let shape = dims(&x.desc)?;
            let same = shape.len() == out.len()
                && shape
                    .iter()
                    .zip(&out)
                    .enumerate()
                    .all(|(k, (a, b))| k == axis || a == b);
            if !same || x.desc.dtype != o.desc.dtype {
                return Err(format!(
                    "{WHAT}: input {i} is {}{shape:?}, output {}{out:?}",
                    x.desc.dtype, o.desc.dtype
                ));
            }
            let cols = shape[axis] * inner;
            let src = x.ptr;
            let dst = o.ptr.wrapping_add_signed(byte_offset(at as i64, elem));
            let walk = Walk::new(vec![outer, cols], vec![[cols as i64, row as i64], [1, 1]]);
            self.copier.copy(stream, &walk, elem, src, dst)?;
            at += cols;
        }
        if at != row {
            return Err(format!(
                "{WHAT}: the inputs fill {at} of {row} columns of {out:?}"
            ));
        }
        Ok(())
    }
}
