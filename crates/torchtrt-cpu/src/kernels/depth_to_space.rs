//! DepthToSpace as one strided copy: the output `[N, C', H, b, W, b]` read from the input
//! seen as `[N, b, b, C', H, W]` (DCR) or `[N, C', b, b, H, W]` (CRD).

use torchtrt_core::layers::{DepthToSpace, DepthToSpaceMode};
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::strided_copy;
use crate::dispatch::with_width;
use crate::strided::Strided;
use crate::tensor_access::{check_arity, check_dtype, check_output, words, words_mut};

const WHAT: &str = "DepthToSpace";

struct DepthToSpaceKernel {
    layer: DepthToSpace,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &DepthToSpace,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(DepthToSpaceKernel {
        layer: layer.clone(),
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for DepthToSpaceKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let b = usize::try_from(self.layer.blocksize)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                format!(
                    "{WHAT}: blocksize {} must be positive",
                    self.layer.blocksize
                )
            })?;
        let &[n, c, h, w] = x.shape() else {
            return Err(format!("{WHAT} needs [N,C,H,W], got {x}"));
        };
        let too_large = || format!("{WHAT}: blocksize {b} is too large for {x}");
        let bb = b.checked_mul(b).ok_or_else(too_large)?;
        if !c.is_multiple_of(bb) {
            return Err(format!("{WHAT}: {c} channels are not a multiple of {b}²"));
        }
        let cb = c / bb;
        let (ho, wo) = (h.checked_mul(b), w.checked_mul(b));
        let (ho, wo) = ho.zip(wo).ok_or_else(too_large)?;
        let out = &mut outputs[0];
        check_output(WHAT, out, self.dtype, &[n, cb, ho, wo])?;
        let plane = (h * w) as isize;
        let (s_by, s_bx, s_c) = match self.layer.mode {
            DepthToSpaceMode::Dcr => (b as isize * cb as isize * plane, cb as isize * plane, plane),
            DepthToSpaceMode::Crd => (b as isize * plane, plane, bb as isize * plane),
        };
        let sn = c as isize * plane;
        let strides = [[sn], [s_c], [w as isize], [s_by], [1], [s_bx]];
        let walk = Strided::new(&[n, cb, h, b, w, b], &strides, [0]);
        with_width!(self.dtype, W => {
            strided_copy::<W>(&walk, words(x)?, words_mut(out)?);
            Ok(())
        })
    }
}
