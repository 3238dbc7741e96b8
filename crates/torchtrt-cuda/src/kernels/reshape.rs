//! The reshape-likes (`Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`) on any dtype: the bytes
//! do not change, so the layer is one device-to-device copy (none when the output already
//! aliases the input). An execution context that lets the output alias the input skips the
//! copy altogether.

use cudarc::driver::result;
use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_plugin_api::DeviceTensor;

use super::map::numel;
use super::{DeviceKernel, PrepareCtx};
use crate::stream::Stream;

/// Prepares a reshape-like layer.
pub(super) fn prepare(
    layer: &LayerKind,
    _inputs: &[InferInput<'_>],
    _ctx: &PrepareCtx<'_>,
) -> Option<Result<Box<dyn DeviceKernel>, String>> {
    let what = match layer {
        LayerKind::Reshape(_) => "Reshape",
        LayerKind::Flatten(_) => "Flatten",
        LayerKind::Squeeze(_) => "Squeeze",
        LayerKind::Unsqueeze(_) => "Unsqueeze",
        _ => return None,
    };
    Some(Ok(Box::new(CopyKernel { what })))
}

struct CopyKernel {
    what: &'static str,
}

impl DeviceKernel for CopyKernel {
    fn execute(
        &self,
        inputs: &[DeviceTensor],
        outputs: &[DeviceTensor],
        stream: &Stream,
    ) -> Result<(), String> {
        let (Some(x), [o]) = (inputs.first(), outputs) else {
            return Err(format!("{} takes a data input and one output", self.what));
        };
        let n = numel(&x.desc.shape);
        if n != numel(&o.desc.shape) || x.desc.dtype != o.desc.dtype {
            return Err(format!(
                "{}: {}{:?} cannot become {}{:?}",
                self.what, x.desc.dtype, x.desc.shape, o.desc.dtype, o.desc.shape
            ));
        }
        let bytes = n * x.desc.dtype.size();
        if bytes == 0 || x.ptr == o.ptr {
            return Ok(());
        }
        stream
            .device()
            .bind()
            .map_err(|e| format!("{}: {e}", self.what))?;
        // SAFETY: both tensors hold `bytes` bytes on this stream's device and outlive the
        // queued copy per the caller's contract.
        unsafe { result::memcpy_dtod_async(o.ptr, x.ptr, bytes, stream.raw().cast()) }
            .map_err(|e| format!("{}: cuMemcpyDtoDAsync: {e:?}", self.what))
    }
}
