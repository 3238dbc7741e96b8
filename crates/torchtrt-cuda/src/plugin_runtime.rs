//! The host's CUDA runtime as plugins see it ([`CudaRuntime`]): their programs compiled by
//! the backend's NVRTC and kept in its program cache (so engines store the images and a
//! deployment needs the driver only), each launch checked against the kernel's parameters
//! and queued on the execution context's stream, occupancy answered per kernel and shape,
//! and constant tables uploaded once per content.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use torchtrt_plugin_api::{CudaProgram, CudaRuntime, KernelLaunch, PluginError, PluginResult};

use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult};
use crate::kernels::Programs;
use crate::memory::DeviceBuffer;
use crate::module::Function;
use crate::stream::Stream;

/// What every plugin on one device shares: the program cache (stored in engines as the
/// `plugins` source) and the constants.
pub struct PluginPrograms {
    device: CudaDevice,
    programs: Programs,
    constants: Mutex<HashMap<Vec<u8>, DeviceBuffer>>,
}

impl std::fmt::Debug for PluginPrograms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PluginPrograms({:?})", self.device)
    }
}

/// The name a plugin program is cached and stored under: its name and a hash of its source,
/// so that two libraries' programs of one name never meet.
pub fn program_key(program: &CudaProgram<'_>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in program.source.as_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}-{h:016x}", program.name)
}

impl PluginPrograms {
    /// An empty cache for `device`.
    pub fn new(device: &CudaDevice) -> PluginPrograms {
        PluginPrograms {
            device: device.clone(),
            programs: Programs::new(device),
            constants: Mutex::default(),
        }
    }

    /// The compiled programs, as engines store and reinstall them.
    pub fn programs(&self) -> &Programs {
        &self.programs
    }

    /// A launcher with a kernel cache of its own, for one plugin layer.
    pub fn launcher(self: &Arc<Self>) -> PluginLauncher {
        PluginLauncher {
            shared: self.clone(),
            known: Mutex::default(),
        }
    }

    fn constant(&self, bytes: &[u8]) -> CudaResult<u64> {
        let mut map = self.constants.lock().map_err(|_| poisoned())?;
        if let Some(b) = map.get(bytes) {
            return Ok(b.ptr());
        }
        let buf = DeviceBuffer::alloc(&self.device, bytes.len().max(16))?;
        let stream = self.device.new_stream()?;
        stream.upload(bytes, &buf)?;
        stream.synchronize()?;
        let ptr = buf.ptr();
        map.insert(bytes.to_vec(), buf);
        Ok(ptr)
    }
}

fn poisoned() -> CudaError {
    CudaError::Invalid("the plugin runtime's lock was poisoned".into())
}

/// A kernel one launcher has used: found by the address of its program's source (sources
/// stay put while their plugin lives), then by names.
struct Known {
    source: (usize, usize),
    program: String,
    kernel: String,
    function: Function,
    params: Option<Vec<usize>>,
    resident: Vec<((u32, u32), u32)>,
}

/// One plugin layer's view of the runtime: the kernels it launched, looked up without
/// hashing sources. [`PluginLauncher::on`] gives the [`CudaRuntime`] for one stream.
pub struct PluginLauncher {
    shared: Arc<PluginPrograms>,
    known: Mutex<Vec<Known>>,
}

impl PluginLauncher {
    /// The runtime queuing work on `stream`.
    pub fn on<'a>(&'a self, stream: &'a Stream) -> StreamRuntime<'a> {
        StreamRuntime {
            launcher: self,
            stream,
        }
    }

    /// Runs `f` on the cache entry of `kernel` of `program`, loading it on first use.
    fn with_kernel<T>(
        &self,
        program: &CudaProgram<'_>,
        kernel: &str,
        f: impl FnOnce(&mut Known) -> PluginResult<T>,
    ) -> PluginResult<T> {
        let source = (program.source.as_ptr() as usize, program.source.len());
        let mut known = self.known.lock().map_err(|_| execution(poisoned()))?;
        let found = known
            .iter()
            .position(|k| k.source == source && k.kernel == kernel && k.program == program.name);
        let at = match found {
            Some(at) => at,
            None => {
                let key = program_key(program);
                let function = self
                    .shared
                    .programs
                    .function_of(&key, program.source, kernel)
                    .map_err(|e| plugin_error(program, e))?;
                known.push(Known {
                    source,
                    program: program.name.to_string(),
                    kernel: kernel.to_string(),
                    params: function.param_sizes(),
                    function,
                    resident: Vec::new(),
                });
                known.len() - 1
            }
        };
        f(&mut known[at])
    }
}

fn execution(e: CudaError) -> PluginError {
    PluginError::Execution(e.to_string())
}

fn plugin_error(program: &CudaProgram<'_>, e: CudaError) -> PluginError {
    match e {
        CudaError::NoDevice(m) => PluginError::Unsupported(format!("no CUDA device: {m}")),
        other => PluginError::Execution(format!("CUDA program `{}`: {other}", program.name)),
    }
}

/// The [`CudaRuntime`] of one launcher on one stream.
pub struct StreamRuntime<'a> {
    launcher: &'a PluginLauncher,
    stream: &'a Stream,
}

impl CudaRuntime for StreamRuntime<'_> {
    fn launch(&self, l: &KernelLaunch<'_>) -> PluginResult<()> {
        if l.grid.contains(&0) || l.block.contains(&0) {
            return Ok(());
        }
        let sizes: Vec<usize> = l.args.iter().map(|a| a.len()).collect();
        let function = self.launcher.with_kernel(&l.program, l.kernel, |k| {
            if let Some(params) = &k.params
                && *params != sizes
            {
                return Err(PluginError::InvalidInput(format!(
                    "kernel `{}` of `{}` takes parameters of {params:?} bytes, the launch passed {sizes:?}",
                    l.kernel, l.program.name
                )));
            }
            Ok(k.function.clone())
        })?;
        let mut storage: Vec<Vec<u64>> = l
            .args
            .iter()
            .map(|a| {
                let mut words = vec![0u64; a.len().div_ceil(8).max(1)];
                bytemuck_copy(a, &mut words);
                words
            })
            .collect();
        let mut params: Vec<*mut c_void> = storage
            .iter_mut()
            .map(|w| w.as_mut_ptr().cast::<c_void>())
            .collect();
        let dim = |d: [u32; 3]| (d[0], d[1], d[2]);
        // SAFETY: the arguments match the kernel's parameters in number and size where the
        // driver describes them; their device pointers are the plugin's promise, as its
        // `enqueue` contract states.
        unsafe {
            function.launch_params(
                self.stream,
                dim(l.grid),
                dim(l.block),
                l.shared_bytes,
                &mut params,
            )
        }
        .map_err(|e| plugin_error(&l.program, e))
    }

    fn resident_blocks(
        &self,
        program: CudaProgram<'_>,
        kernel: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> PluginResult<u32> {
        let device = &self.launcher.shared.device;
        self.launcher.with_kernel(&program, kernel, |k| {
            let shape = (threads, shared_bytes);
            if let Some(&(_, n)) = k.resident.iter().find(|(s, _)| *s == shape) {
                return Ok(n);
            }
            let per_sm = k
                .function
                .resident_blocks_per_sm(threads, shared_bytes)
                .map_err(|e| plugin_error(&program, e))?;
            let sms = device.multiprocessors().map_err(execution)?;
            let n = per_sm.max(1).saturating_mul(sms);
            k.resident.push((shape, n));
            Ok(n)
        })
    }

    fn constant(&self, bytes: &[u8]) -> PluginResult<u64> {
        self.launcher.shared.constant(bytes).map_err(execution)
    }
}

/// Copies `src` into the start of `dst`'s bytes (little endian words).
fn bytemuck_copy(src: &[u8], dst: &mut [u64]) {
    for (w, chunk) in dst.iter_mut().zip(src.chunks(8)) {
        let mut le = [0u8; 8];
        le[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_le_bytes(le);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CUDA C of the kernel-plugin example (`examples/kernel_plugin`), compiled as this
    /// runtime compiles it when an engine is built.
    #[test]
    fn kernel_plugin_example_compiles_with_nvrtc() {
        let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/kernel_plugin/swiglu.toml");
        let creator =
            torchtrt_core::kernel_plugin::load_spec(&spec).unwrap_or_else(|e| panic!("{e}"));
        let (name, source) = creator.cuda_program().expect("a CUDA part");
        crate::kernels::prelude::assert_source_compiles(name, source);
    }

    /// The built-in plugins' programs, compiled as this runtime compiles them.
    #[test]
    fn every_plugin_program_compiles_with_nvrtc() {
        let programs = torchtrt_plugins::cuda::programs();
        assert!(programs.len() >= 6, "{} programs", programs.len());
        for p in programs {
            crate::kernels::prelude::assert_source_compiles(p.name, p.source);
        }
    }

    #[test]
    fn program_keys_tell_sources_apart() {
        let a = CudaProgram {
            name: "gelu",
            source: "extern \"C\" __global__ void k() {}",
        };
        let b = CudaProgram {
            name: "gelu",
            source: "extern \"C\" __global__ void k() { }",
        };
        assert_eq!(program_key(&a), program_key(&a));
        assert_ne!(program_key(&a), program_key(&b));
        assert!(program_key(&a).starts_with("gelu-"));
    }
}
