//! Memory limits: sizes that come from a model, an engine or an input are computed with
//! checked arithmetic and compared with a limit before anything is allocated, so an
//! enormous but valid shape is an error naming the layer, never an abort.

use std::sync::OnceLock;

use torchtrt_plugin_api::DType;

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`); `u64::MAX` where
/// it cannot be read. The default memory limit of builds and execution contexts.
pub fn physical_memory() -> u64 {
    static TOTAL: OnceLock<u64> = OnceLock::new();
    *TOTAL.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            })
            .unwrap_or(u64::MAX)
    })
}

/// Bytes of a dense tensor of `dtype` and `shape`; `None` when the count overflows `u64`.
pub fn tensor_bytes(dtype: DType, shape: &[u64]) -> Option<u64> {
    shape
        .iter()
        .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d))
}

/// Checks a tensor of `dtype` and `shape` against `limit`; the error says how many bytes
/// it needs (or that the count overflows) and the limit.
pub fn check_tensor(dtype: DType, shape: &[u64], limit: u64) -> Result<u64, String> {
    match tensor_bytes(dtype, shape) {
        Some(bytes) if bytes <= limit => Ok(bytes),
        Some(bytes) => Err(format!(
            "a {dtype} tensor of shape {shape:?} needs {bytes} bytes, over the memory limit of {limit} bytes"
        )),
        None => Err(format!(
            "a {dtype} tensor of shape {shape:?} needs more than 2^64 bytes, over the memory limit of {limit} bytes"
        )),
    }
}
