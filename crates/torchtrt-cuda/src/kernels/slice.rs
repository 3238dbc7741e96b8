//! `Slice` layers on any dtype whose parameters are fields or constant inputs: a strided
//! copy from the first selected element with the steps folded into the strides (negative
//! steps walk backwards). Slices with run-time parameters stay on the host.

use torchtrt_core::Tensor;
use torchtrt_core::layers::{InferInput, LayerKind, Slice};
use torchtrt_plugin_api::DeviceTensor;

use super::access::MAX_RANK;
use super::copy::{Copier, byte_offset};
use super::layout::{Walk, contiguous_strides};
use super::operands::dims;
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "Slice";

/// Prepares a `Slice` layer whose parameter inputs are all constants.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Slice(l) = layer else {
        return None;
    };
    if inputs.first()?.shape.len() > MAX_RANK {
        return None;
    }
    let values: Vec<&Tensor> = inputs[1..].iter().map(|i| i.value).collect::<Option<_>>()?;
    Some((|| {
        let slice = l.with_values(&values).map_err(|e| format!("{WHAT}: {e}"))?;
        let copier = Copier::new(WHAT, ctx)?;
        Ok(Box::new(SliceKernel { slice, copier }) as Box<dyn DeviceKernel>)
    })())
}

struct SliceKernel {
    slice: Slice,
    copier: Copier,
}

impl DeviceKernel for SliceKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let (Some(x), [o]) = (inputs.first(), outputs) else {
            return Err(format!("{WHAT} takes a data input and one output"));
        };
        let shape = dims(&x.desc)?;
        let out = dims(&o.desc)?;
        let plan = self
            .slice
            .resolve(&shape)
            .map_err(|e| format!("{WHAT}: {e}"))?;
        let lens: Vec<usize> = plan.iter().map(|p| p.2).collect();
        if lens != out || x.desc.dtype != o.desc.dtype {
            return Err(format!(
                "{WHAT}: {}{shape:?} slices to {lens:?}, the output is {}{out:?}",
                x.desc.dtype, o.desc.dtype
            ));
        }
        let own = contiguous_strides(&shape);
        let first: i64 = plan
            .iter()
            .zip(&own)
            .map(|(p, s)| if p.2 == 0 { 0 } else { p.0 * s })
            .sum();
        let dst = contiguous_strides(&out);
        let strides = plan
            .iter()
            .zip(&own)
            .zip(&dst)
            .map(|((p, s), d)| [p.1 * s, *d])
            .collect();
        let elem = x.desc.dtype.size();
        let src = x.ptr.wrapping_add_signed(byte_offset(first, elem));
        self.copier
            .copy(stream, &Walk::new(out, strides), elem, src, o.ptr)
    }
}
