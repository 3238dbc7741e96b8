//! 8-bit convolution ([`QuantizedConvolution`]) on integer tensor cores: the implicit GEMM of
//! `implicit_gemm` over bytes (`mma.m16n8k32`, exact 32-bit sums), its input copied channels
//! last unless the layout pass made the layer channels last, each output channel's sums
//! scaled to f16 or f32 with the bias, residual and activation fused, or quantized to bytes
//! as they are written. Layers the kernel does not
//! take ([`takes_int8`]: a non-zero input zero point, several groups, channels not a multiple
//! of 64, 1-D or 3-D windows) are declined and run on the host.

use torchtrt_core::layers::{InferInput, LayerKind, QuantizedConvolution};
use torchtrt_plugin_api::{DType, DeviceTensor};

use super::convolution::{Geometry, channels_first_dims, check_extras, geometry, shape};
use super::implicit_gemm::{ImplicitGemm, takes_int8};
use super::operands::{dims, expect_dtype, expect_inputs};
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

const WHAT: &str = "QuantizedConvolution";

struct QuantizedConvKernel {
    /// The input's byte type (`I8` or `U8`).
    input: DType,
    /// The bias's and residual's float type.
    dtype: DType,
    /// The output's type: `dtype`, or the bytes of its quantization.
    output: DType,
    /// Input, residual and output are `[N, H, W, C]` (the layout pass's choice).
    channels_last: bool,
    geo: Geometry,
    gemm: ImplicitGemm,
}

pub(super) fn prepare(
    layer: &LayerKind,
    inputs: &[InferInput<'_>],
    ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let LayerKind::QuantizedConvolution(l) = layer else {
        return None;
    };
    let x = inputs.first()?;
    if inputs.len() < 2 || inputs[2..].iter().any(|i| i.dtype != l.dtype) {
        return None;
    }
    let geo = geometry(&l.conv, 2)?;
    let gemm = ImplicitGemm::prepare_int8(ctx, l, x, inputs.get(1)?.value)?;
    Some(gemm.map(|gemm| {
        Box::new(QuantizedConvKernel {
            input: x.dtype,
            dtype: l.dtype,
            output: l.output.map_or(l.dtype, |q| q.dtype),
            channels_last: l.conv.channels_last,
            geo,
            gemm,
        }) as Box<dyn DeviceKernel>
    }))
}

/// Whether the CUDA backend runs `l` over `inputs` on integer tensor cores of a device of
/// compute capability `cc`.
pub(crate) fn runs(l: &QuantizedConvolution, inputs: &[InferInput<'_>], cc: (u32, u32)) -> bool {
    inputs.len() >= 2
        && geometry(&l.conv, 2).is_some()
        && takes_int8(l, &inputs[0], inputs[1].value, cc)
}

impl DeviceKernel for QuantizedConvKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        expect_inputs(WHAT, inputs, outputs, 2..=4, 1)?;
        expect_dtype(WHAT, &inputs[..1], self.input)?;
        expect_dtype(WHAT, &inputs[1..2], DType::I8)?;
        expect_dtype(WHAT, &inputs[2..], self.dtype)?;
        expect_dtype(WHAT, outputs, self.output)?;
        let (xd, wd, yd) = (
            dims(&inputs[0].desc)?,
            dims(&inputs[1].desc)?,
            dims(&outputs[0].desc)?,
        );
        let [x_first, y_first] = channels_first_dims(WHAT, self.channels_last, &xd, &yd)?;
        let (s, k) = shape(2, 1, &self.geo, [&x_first, &wd, &y_first])?;
        let p = s.problem(&self.geo, k);
        check_extras(WHAT, inputs, p.m, &yd)?;
        if yd.iter().product::<usize>() == 0 {
            return Ok(());
        }
        let bias = inputs.get(2).map_or(0, |b| b.ptr);
        let res = inputs.get(3).map_or(0, |r| r.ptr);
        let ptrs = [inputs[0].ptr, bias, res, outputs[0].ptr];
        if self.gemm.run(&p, self.channels_last, ptrs, stream)? {
            return Ok(());
        }
        Err(format!(
            "{WHAT}: x {xd:?} and y {yd:?} exceed the kernel's 32-bit indexing"
        ))
    }
}
