//! Helpers the compute kernels share: concrete shapes of device tensors, arity checks,
//! constant weights uploaded once, launch geometry and f32 conversions of host tensors.

use torchtrt_plugin_api::{DType, DeviceTensor, TensorDesc};

use crate::device::CudaDevice;
use crate::memory::DeviceBuffer;

/// The concrete dims of `desc`; an error for a dim still unknown.
pub(crate) fn dims(desc: &TensorDesc) -> Result<Vec<usize>, String> {
    desc.shape
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| format!("dim {d} of {:?} is not concrete", desc.shape))
        })
        .collect()
}

/// Checks `inputs.len()` is `want_in` (or within `want_in..=max_in` via [`expect_inputs`])
/// and there are `want_out` outputs.
pub(crate) fn expect_arity(
    what: &str,
    inputs: &[DeviceTensor],
    outputs: &[DeviceTensor],
    want_in: usize,
    want_out: usize,
) -> Result<(), String> {
    expect_inputs(what, inputs, outputs, want_in..=want_in, want_out)
}

/// Checks the number of inputs lies in `range` and there are `want_out` outputs.
pub(crate) fn expect_inputs(
    what: &str,
    inputs: &[DeviceTensor],
    outputs: &[DeviceTensor],
    range: std::ops::RangeInclusive<usize>,
    want_out: usize,
) -> Result<(), String> {
    if !range.contains(&inputs.len()) || outputs.len() != want_out {
        return Err(format!(
            "{what} takes {range:?} inputs and {want_out} outputs, got {} and {}",
            inputs.len(),
            outputs.len()
        ));
    }
    Ok(())
}

/// Checks every tensor has `dtype`.
pub(crate) fn expect_dtype(
    what: &str,
    tensors: &[DeviceTensor],
    dtype: DType,
) -> Result<(), String> {
    match tensors.iter().find(|t| t.desc.dtype != dtype) {
        Some(t) => Err(format!(
            "{what} was prepared for {dtype}, got {}",
            t.desc.dtype
        )),
        None => Ok(()),
    }
}

/// A constant uploaded to the device once, at prepare time.
pub(crate) struct Weights {
    buffer: DeviceBuffer,
}

impl Weights {
    /// Uploads `bytes`.
    pub(crate) fn upload_bytes(
        device: &CudaDevice,
        bytes: &[u8],
        what: &str,
    ) -> Result<Weights, String> {
        let err = |e| format!("{what}: uploading {} bytes of weights: {e}", bytes.len());
        let buffer = DeviceBuffer::alloc(device, bytes.len().max(1)).map_err(err)?;
        if !bytes.is_empty() {
            let stream = device.new_stream().map_err(err)?;
            stream.upload(bytes, &buffer).map_err(err)?;
        }
        Ok(Weights { buffer })
    }

    /// The device address.
    pub(crate) fn ptr(&self) -> u64 {
        self.buffer.ptr()
    }
}

/// Blocks of `threads` covering `n` items, capped for the grid's x limit (kernels loop).
pub(crate) fn grid_for(n: usize, threads: u32) -> u32 {
    n.div_ceil(threads as usize).clamp(1, 1 << 20) as u32
}

/// `v` as i32 for a kernel argument; an error naming `what` when it does not fit.
pub(crate) fn arg_i32(v: usize, what: &str) -> Result<i32, String> {
    i32::try_from(v).map_err(|_| format!("{what} {v} exceeds a 32-bit kernel argument"))
}
