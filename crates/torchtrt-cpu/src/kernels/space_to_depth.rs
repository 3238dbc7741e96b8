//! SpaceToDepth as one strided copy: the output `[N, b, b, C, H', W']` read from the input
//! seen as `[N, C, H', b, W', b]`.

use torchtrt_core::layers::SpaceToDepth;
use torchtrt_core::plugin_api::DType;
use torchtrt_core::{InferInput, Kernel, Tensor};

use super::copy::strided_copy;
use crate::dispatch::with_width;
use crate::strided::Strided;
use crate::tensor_access::{check_arity, check_dtype, check_output, words, words_mut};

const WHAT: &str = "SpaceToDepth";

struct SpaceToDepthKernel {
    blocksize: i64,
    dtype: DType,
}

pub(super) fn prepare(
    layer: &SpaceToDepth,
    inputs: &[InferInput<'_>],
) -> Result<Box<dyn Kernel>, String> {
    Ok(Box::new(SpaceToDepthKernel {
        blocksize: layer.blocksize,
        dtype: inputs[0].dtype,
    }))
}

impl Kernel for SpaceToDepthKernel {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        check_arity(WHAT, inputs, outputs, 1..=1, 1)?;
        let x = inputs[0];
        check_dtype(WHAT, x, self.dtype)?;
        let b = usize::try_from(self.blocksize)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| format!("{WHAT}: blocksize {} must be positive", self.blocksize))?;
        let &[n, c, h, w] = x.shape() else {
            return Err(format!("{WHAT} needs [N,C,H,W], got {x}"));
        };
        if !h.is_multiple_of(b) || !w.is_multiple_of(b) {
            return Err(format!("{WHAT}: {x} is not divisible into {b}×{b} blocks"));
        }
        let (ho, wo) = (h / b, w / b);
        let out = &mut outputs[0];
        let channels = b
            .checked_mul(b)
            .and_then(|bb| bb.checked_mul(c))
            .ok_or_else(|| format!("{WHAT}: blocksize {b} is too large for {x}"))?;
        check_output(WHAT, out, self.dtype, &[n, channels, ho, wo])?;
        let (bi, wi) = (b as isize, w as isize);
        let strides = [
            [(c * h * w) as isize],
            [wi],
            [1],
            [(h * w) as isize],
            [bi * wi],
            [bi],
        ];
        let walk = Strided::new(&[n, b, b, c, ho, wo], &strides, [0]);
        with_width!(self.dtype, W => {
            strided_copy::<W>(&walk, words(x)?, words_mut(out)?);
            Ok(())
        })
    }
}
