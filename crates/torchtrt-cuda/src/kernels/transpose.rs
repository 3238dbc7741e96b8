//! `Transpose` layers on any dtype: a strided copy (tiled through shared memory when the
//! innermost dim moves).

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::DeviceTensor;

use super::access::MAX_RANK;
use super::copy::Copier;
use super::layout::{Walk, contiguous_strides};
use super::operands::{dims, expect_arity};
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "Transpose";

/// Prepares a `Transpose` layer of rank up to the walk's limit.
pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::Transpose(l) = layer else {
        return None;
    };
    if inputs.first()?.shape.len() > MAX_RANK {
        return None;
    }
    Some(Copier::new(WHAT, ctx).map(|copier| {
        Box::new(TransposeKernel {
            perm: l.perm.clone(),
            copier,
        }) as Box<dyn DeviceKernel>
    }))
}

struct TransposeKernel {
    perm: Vec<usize>,
    copier: Copier,
}

impl DeviceKernel for TransposeKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_arity(WHAT, inputs, outputs, 1, 1)?;
        let (x, o) = (&inputs[0], &outputs[0]);
        let shape = dims(&x.desc)?;
        let out = dims(&o.desc)?;
        let src = contiguous_strides(&shape);
        let want: Option<Vec<usize>> = self.perm.iter().map(|&p| shape.get(p).copied()).collect();
        if want.as_ref() != Some(&out)
            || x.desc.dtype != o.desc.dtype
            || self.perm.len() != shape.len()
        {
            return Err(format!(
                "{WHAT}: {:?} of {}{shape:?} does not give {}{out:?}",
                self.perm, x.desc.dtype, o.desc.dtype
            ));
        }
        let dst = contiguous_strides(&out);
        let strides = self
            .perm
            .iter()
            .zip(&dst)
            .map(|(&p, &d)| [src[p], d])
            .collect();
        let walk = Walk::new(out, strides);
        self.copier
            .copy(stream, &walk, x.desc.dtype.size(), x.ptr, o.ptr)
    }
}
