//! The host's CUDA runtime as plugins see it. A plugin never loads the driver or NVRTC
//! itself: it describes its CUDA C programs and kernel launches, and the host's CUDA backend
//! compiles each program for the launch device (at build time, storing the image in the
//! engine, so deployment needs the driver only), caches the modules, checks every launch's
//! arguments against the kernel's parameters, and queues it on the context's stream.

use crate::error::PluginResult;

/// A CUDA C program: a name unique within its library (`gelu`) and its complete source,
/// compiled by NVRTC as is (no toolkit headers; [`crate::cuda_c::ELEMENTS`] may be
/// prepended by the plugin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaProgram<'a> {
    /// The program's name.
    pub name: &'a str,
    /// Its CUDA C source.
    pub source: &'a str,
}

/// One kernel launch a plugin asks of the host.
#[derive(Clone, Copy, Debug)]
pub struct KernelLaunch<'a> {
    /// The program holding the kernel.
    pub program: CudaProgram<'a>,
    /// The kernel's (`extern "C"`) name.
    pub kernel: &'a str,
    /// Blocks in x, y, z; a launch with a zero dimension does nothing.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
    /// Each parameter's bytes, in the kernel's order: scalars little-endian, pointers as
    /// 8-byte device addresses, structs passed by value in their C layout.
    pub args: &'a [&'a [u8]],
}

/// The CUDA services the host provides to a plugin's `enqueue` (see [`crate::CudaLaunch`]).
pub trait CudaRuntime: Sync {
    /// Queues `launch` on the launch's stream, compiling and loading its program on first
    /// use. A launch whose argument count or sizes differ from the kernel's parameters (as
    /// the driver reports them) is refused.
    fn launch(&self, launch: &KernelLaunch<'_>) -> PluginResult<()>;

    /// How many blocks of `threads` threads with `shared_bytes` of dynamic shared memory
    /// `kernel` of `program` keeps resident on the whole device at once (at least 1), for
    /// kernels whose blocks stride over their work in whole waves.
    fn resident_blocks(
        &self,
        program: CudaProgram<'_>,
        kernel: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> PluginResult<u32>;

    /// A device copy of `bytes` (tap tables, per-channel parameters), uploaded once per
    /// distinct content and device and kept for the process's life. Its first use waits
    /// for the device.
    fn constant(&self, bytes: &[u8]) -> PluginResult<u64>;
}

/// A runtime that refuses every request, for launches made where no CUDA runtime exists
/// (checks that fail before any kernel, hosts of ABI version 1).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoCudaRuntime;

impl NoCudaRuntime {
    fn refuse<T>(&self) -> PluginResult<T> {
        Err(crate::PluginError::Unsupported(
            "no CUDA runtime: the host provides none".into(),
        ))
    }
}

impl CudaRuntime for NoCudaRuntime {
    fn launch(&self, _launch: &KernelLaunch<'_>) -> PluginResult<()> {
        self.refuse()
    }

    fn resident_blocks(
        &self,
        _program: CudaProgram<'_>,
        _kernel: &str,
        _threads: u32,
        _shared_bytes: u32,
    ) -> PluginResult<u32> {
        self.refuse()
    }

    fn constant(&self, _bytes: &[u8]) -> PluginResult<u64> {
        self.refuse()
    }
}
