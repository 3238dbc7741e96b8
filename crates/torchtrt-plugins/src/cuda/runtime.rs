//! The built-in plugins' side of the host's CUDA runtime: each program's complete source,
//! kernel arguments as bytes, and launches, occupancy queries and constants forwarded to the
//! [`CudaRuntime`](torchtrt_plugin_api::CudaRuntime) a [`CudaLaunch`] carries.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use torchtrt_plugin_api::cuda_c::ELEMENTS;
use torchtrt_plugin_api::{CudaLaunch, CudaProgram, KernelLaunch, PluginResult};

use super::COMMON;

/// One plugin's CUDA C program: a name (unique among the built-in plugins) and its source,
/// compiled after [`ELEMENTS`] and [`COMMON`].
pub(crate) struct Program {
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
}

impl Program {
    /// The program as the host compiles it: the shared prelude, then its own source. Built
    /// once per program and kept for the process's life.
    pub(crate) fn cuda(&self) -> CudaProgram<'static> {
        static FULL: OnceLock<RwLock<HashMap<&'static str, &'static str>>> = OnceLock::new();
        let full = FULL.get_or_init(Default::default);
        let known = full
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(self.name)
            .copied();
        let source = known.unwrap_or_else(|| {
            let mut map = full.write().unwrap_or_else(|p| p.into_inner());
            map.entry(self.name)
                .or_insert_with(|| String::leak(format!("{ELEMENTS}{COMMON}\n{}", self.source)))
        });
        CudaProgram {
            name: self.name,
            source,
        }
    }
}

/// A kernel's arguments, each as the parameter's bytes (little endian).
#[derive(Clone, Default)]
pub(crate) struct Args {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Args {
    fn push(mut self, b: &[u8]) -> Args {
        self.bytes.extend_from_slice(b);
        self.ends.push(self.bytes.len());
        self
    }

    pub(crate) fn ptr(self, p: u64) -> Args {
        self.push(&p.to_le_bytes())
    }

    pub(crate) fn i64(self, v: i64) -> Args {
        self.push(&v.to_le_bytes())
    }

    pub(crate) fn i32(self, v: i32) -> Args {
        self.push(&v.to_le_bytes())
    }

    pub(crate) fn f32(self, v: f32) -> Args {
        self.push(&v.to_le_bytes())
    }

    /// A struct passed by value, given as its bytes in the C layout.
    pub(crate) fn bytes(self, b: &[u8]) -> Args {
        self.push(b)
    }

    fn slices(&self) -> Vec<&[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(s, &e)| &self.bytes[s..e])
            .collect()
    }
}

/// Queues `kernel` of `program` on the launch's stream through the host's runtime, which
/// refuses a launch whose arguments differ from the kernel's parameters.
///
/// # Safety
/// Every pointer in `args` must be valid device memory of the launch's device for as long as
/// the stream runs the kernel.
pub(crate) unsafe fn launch(
    program: &Program,
    kernel: &str,
    cuda: &CudaLaunch<'_>,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    args: Args,
) -> PluginResult<()> {
    cuda.runtime.launch(&KernelLaunch {
        program: program.cuda(),
        kernel,
        grid: [grid.0, grid.1, grid.2],
        block: [block.0, block.1, block.2],
        shared_bytes: shared,
        args: &args.slices(),
    })
}

/// Blocks of `threads` threads with `shared` bytes of dynamic shared memory that `kernel` of
/// `program` keeps resident on the launch's whole device at once (at least one).
pub(crate) fn resident_blocks(
    program: &Program,
    kernel: &str,
    cuda: &CudaLaunch<'_>,
    threads: u32,
    shared: u32,
) -> PluginResult<u32> {
    cuda.runtime
        .resident_blocks(program.cuda(), kernel, threads, shared)
}

/// A device copy of `bytes` on the launch's device, kept by the host.
pub(crate) fn constant(cuda: &CudaLaunch<'_>, bytes: &[u8]) -> PluginResult<u64> {
    cuda.runtime.constant(bytes)
}
