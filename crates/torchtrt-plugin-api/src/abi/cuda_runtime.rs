//! The host's CUDA runtime across the ABI: a [`CudaRuntime`] as a `TtrtCudaRuntime` table
//! (host side, handed to a C library's `enqueue`) and a `TtrtCudaRuntime` table as a
//! [`CudaRuntime`] (library side, handed to a Rust plugin behind the ABI).

use std::ffi::{c_char, c_void};

use super::ptr;
use super::status::{ErrorBuf, guard};
use super::types::{
    TTRT_ERROR_INVALID_ARGUMENT, TTRT_ERROR_PANIC, TTRT_ERROR_UNSUPPORTED, TTRT_OK,
    TtrtCudaRuntime, TtrtErrorBuf, TtrtKernelLaunch, TtrtStatus,
};
use crate::cuda_runtime::{CudaProgram, CudaRuntime, KernelLaunch};
use crate::error::{PluginError, PluginResult};

/// Most parameters one kernel launch may pass.
const MAX_ARGS: usize = 4096;

/// The table over `runtime`, valid while `runtime` (the reference itself) lives.
pub(crate) fn table(runtime: &&dyn CudaRuntime) -> TtrtCudaRuntime {
    TtrtCudaRuntime {
        self_: (runtime as *const &dyn CudaRuntime).cast(),
        launch: Some(host_launch),
        resident_blocks: Some(host_resident_blocks),
        constant: Some(host_constant),
    }
}

fn invalid(e: String) -> PluginError {
    PluginError::InvalidInput(e)
}

/// # Safety
/// `this` is the `self_` of a table made by [`table`], still alive.
unsafe fn runtime<'a>(this: *const c_void) -> PluginResult<&'a dyn CudaRuntime> {
    // SAFETY: by the caller's promise.
    unsafe { this.cast::<&dyn CudaRuntime>().as_ref() }
        .copied()
        .ok_or_else(|| invalid("CUDA runtime is NULL".into()))
}

/// # Safety
/// `p` is NULL with `len` 0, or points to `len` readable bytes.
unsafe fn text<'a>(p: *const c_char, len: usize, what: &str) -> PluginResult<&'a str> {
    // SAFETY: by the caller's promise.
    let bytes = unsafe { ptr::slice(p.cast::<u8>(), len, what) }.map_err(invalid)?;
    std::str::from_utf8(bytes).map_err(|_| invalid(format!("{what} is not UTF-8")))
}

/// Calls `f` with the launch `l` describes.
///
/// # Safety
/// `l` is NULL or a valid launch whose pointers hold what their lengths say.
unsafe fn with_launch<T>(
    l: *const TtrtKernelLaunch,
    f: impl FnOnce(&KernelLaunch<'_>) -> PluginResult<T>,
) -> PluginResult<T> {
    // SAFETY: by the caller's promise.
    let l = unsafe { l.as_ref() }.ok_or_else(|| invalid("kernel launch is NULL".into()))?;
    // SAFETY: each string holds its length's bytes by the caller's promise.
    let (name, source, kernel) = unsafe {
        (
            text(l.program, l.program_len, "program name")?,
            text(l.source, l.source_len, "program source")?,
            text(l.kernel, l.kernel_len, "kernel name")?,
        )
    };
    let n = ptr::count(l.nb_args, "kernel arguments").map_err(invalid)?;
    if n > MAX_ARGS {
        return Err(invalid(format!("{n} kernel arguments, at most {MAX_ARGS}")));
    }
    // SAFETY: `nb_args` entries each, by the caller's promise.
    let (ptrs, sizes) = unsafe {
        (
            ptr::slice(l.args, n, "kernel arguments").map_err(invalid)?,
            ptr::slice(l.arg_sizes, n, "kernel argument sizes").map_err(invalid)?,
        )
    };
    let mut args = Vec::with_capacity(n);
    for (i, (&p, &size)) in ptrs.iter().zip(sizes).enumerate() {
        // SAFETY: each argument holds its size's bytes by the caller's promise.
        let bytes = unsafe { ptr::slice(p.cast::<u8>(), size, "kernel argument") }
            .map_err(|e| invalid(format!("argument {i}: {e}")))?;
        args.push(bytes);
    }
    f(&KernelLaunch {
        program: CudaProgram { name, source },
        kernel,
        grid: l.grid,
        block: l.block,
        shared_bytes: l.shared_bytes,
        args: &args,
    })
}

unsafe extern "C" fn host_launch(
    this: *const c_void,
    launch: *const TtrtKernelLaunch,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: the table's own state and a launch from the library, per the ABI's rules.
    unsafe {
        guard(err, || {
            let rt = runtime(this)?;
            with_launch(launch, |k| rt.launch(k))
        })
    }
}

unsafe extern "C" fn host_resident_blocks(
    this: *const c_void,
    launch: *const TtrtKernelLaunch,
    blocks: *mut u32,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: as for `host_launch`; `blocks` is NULL or writable.
    unsafe {
        guard(err, || {
            let rt = runtime(this)?;
            let out = blocks
                .as_mut()
                .ok_or_else(|| invalid("blocks is NULL".into()))?;
            *out = with_launch(launch, |k| {
                let threads = k.block.iter().try_fold(1u32, |a, &b| a.checked_mul(b));
                let threads = threads.ok_or_else(|| invalid("block size overflows".into()))?;
                rt.resident_blocks(k.program, k.kernel, threads, k.shared_bytes)
            })?;
            Ok(())
        })
    }
}

unsafe extern "C" fn host_constant(
    this: *const c_void,
    bytes: *const c_void,
    len: usize,
    out: *mut u64,
    err: *mut TtrtErrorBuf,
) -> TtrtStatus {
    // SAFETY: as for `host_launch`; `bytes` holds `len` bytes, `out` is NULL or writable.
    unsafe {
        guard(err, || {
            let rt = runtime(this)?;
            let data = ptr::slice(bytes.cast::<u8>(), len, "constant").map_err(invalid)?;
            let out = out.as_mut().ok_or_else(|| invalid("ptr is NULL".into()))?;
            *out = rt.constant(data)?;
            Ok(())
        })
    }
}

/// The host's table as a [`CudaRuntime`], for a Rust plugin behind the ABI.
pub(crate) struct ForeignCudaRuntime {
    raw: Option<TtrtCudaRuntime>,
}

// SAFETY: the host's table is valid for the launch, and its functions are callable from any
// thread (the host implements them over a `Sync` runtime).
unsafe impl Sync for ForeignCudaRuntime {}

impl ForeignCudaRuntime {
    /// The table at `raw` (NULL when the host gave none, as version-1 hosts do).
    ///
    /// # Safety
    /// `raw` is NULL or a valid table, alive for as long as the result is used.
    pub(crate) unsafe fn new(raw: *const TtrtCudaRuntime) -> ForeignCudaRuntime {
        // SAFETY: by the caller's promise.
        ForeignCudaRuntime {
            raw: unsafe { raw.as_ref() }.copied(),
        }
    }

    fn call(
        &self,
        what: &str,
        f: impl FnOnce(&TtrtCudaRuntime, *mut TtrtErrorBuf) -> Option<TtrtStatus>,
    ) -> PluginResult<()> {
        let raw = self.raw.as_ref().ok_or_else(|| {
            PluginError::Unsupported("the host provides no CUDA runtime (ABI version 1)".into())
        })?;
        let mut buf = ErrorBuf::new();
        let mut eb = buf.raw();
        let status = f(raw, &mut eb).ok_or_else(|| {
            PluginError::Unsupported(format!("the host's CUDA runtime has no `{what}`"))
        })?;
        let msg = || buf.message();
        match status {
            TTRT_OK => Ok(()),
            TTRT_ERROR_INVALID_ARGUMENT => Err(PluginError::InvalidInput(msg())),
            TTRT_ERROR_UNSUPPORTED => Err(PluginError::Unsupported(msg())),
            TTRT_ERROR_PANIC => Err(PluginError::Panic(msg())),
            _ => Err(PluginError::Execution(msg())),
        }
    }
}

/// `launch` in C terms, valid while `launch` and the vectors live.
fn raw_launch(
    launch: &KernelLaunch<'_>,
    ptrs: &mut Vec<*const c_void>,
    sizes: &mut Vec<usize>,
) -> PluginResult<TtrtKernelLaunch> {
    ptrs.extend(launch.args.iter().map(|a| a.as_ptr().cast::<c_void>()));
    sizes.extend(launch.args.iter().map(|a| a.len()));
    Ok(TtrtKernelLaunch {
        program: launch.program.name.as_ptr().cast(),
        program_len: launch.program.name.len(),
        source: launch.program.source.as_ptr().cast(),
        source_len: launch.program.source.len(),
        kernel: launch.kernel.as_ptr().cast(),
        kernel_len: launch.kernel.len(),
        grid: launch.grid,
        block: launch.block,
        shared_bytes: launch.shared_bytes,
        nb_args: ptr::to_count(launch.args.len(), "kernel arguments").map_err(invalid)?,
        args: ptrs.as_ptr(),
        arg_sizes: sizes.as_ptr(),
    })
}

impl CudaRuntime for ForeignCudaRuntime {
    fn launch(&self, launch: &KernelLaunch<'_>) -> PluginResult<()> {
        let (mut ptrs, mut sizes) = (Vec::new(), Vec::new());
        let raw = raw_launch(launch, &mut ptrs, &mut sizes)?;
        self.call("launch", |t, err| {
            // SAFETY: the host's function on its own state; `raw` points at live data.
            t.launch.map(|f| unsafe { f(t.self_, &raw, err) })
        })
    }

    fn resident_blocks(
        &self,
        program: CudaProgram<'_>,
        kernel: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> PluginResult<u32> {
        let query = KernelLaunch {
            program,
            kernel,
            grid: [1, 1, 1],
            block: [threads, 1, 1],
            shared_bytes,
            args: &[],
        };
        let (mut ptrs, mut sizes) = (Vec::new(), Vec::new());
        let raw = raw_launch(&query, &mut ptrs, &mut sizes)?;
        let mut blocks = 0u32;
        self.call("resident_blocks", |t, err| {
            // SAFETY: as for `launch`; `blocks` is writable.
            t.resident_blocks
                .map(|f| unsafe { f(t.self_, &raw, &mut blocks, err) })
        })?;
        Ok(blocks.max(1))
    }

    fn constant(&self, bytes: &[u8]) -> PluginResult<u64> {
        let mut out = 0u64;
        self.call("constant", |t, err| {
            // SAFETY: as for `launch`; `bytes` is live and `out` writable.
            t.constant
                .map(|f| unsafe { f(t.self_, bytes.as_ptr().cast(), bytes.len(), &mut out, err) })
        })?;
        Ok(out)
    }
}
