//! `Expand` layers on any dtype: a strided copy whose broadcast dims have source stride 0.
//! The shape input is not read: the output's shape says it all.

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::DeviceTensor;

use super::access::MAX_RANK;
use super::copy::Copier;
use super::layout::{Walk, broadcast_strides, contiguous_strides};
use super::operands::{dims, expect_arity};
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "Expand";

/// Prepares an `Expand` layer when its output rank is known and within the walk's limit.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Expand(_) = layer else {
        return None;
    };
    let shape_len = inputs.get(1)?.shape.first()?.as_const()?;
    if inputs[0].shape.len().max(shape_len as usize) > MAX_RANK {
        return None;
    }
    Some(
        Copier::new(WHAT, ctx)
            .map(|copier| Box::new(ExpandKernel { copier }) as Box<dyn DeviceKernel>),
    )
}

struct ExpandKernel {
    copier: Copier,
}

impl DeviceKernel for ExpandKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 2, 1)?;
        let (x, o) = (&inputs[0], &outputs[0]);
        if x.desc.dtype != o.desc.dtype {
            return Err(format!(
                "{WHAT}: {} input, {} output",
                x.desc.dtype, o.desc.dtype
            ));
        }
        let out = dims(&o.desc)?;
        let src = broadcast_strides(&dims(&x.desc)?, &out).map_err(|e| format!("{WHAT}: {e}"))?;
        let dst = contiguous_strides(&out);
        let walk = Walk::new(out, src.into_iter().zip(dst).map(|(s, d)| [s, d]).collect());
        self.copier
            .copy(stream, &walk, x.desc.dtype.size(), x.ptr, o.ptr)
    }
}
