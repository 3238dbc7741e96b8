//! Loading compiled kernels into a device and finding their entry points.

use std::ffi::{CString, c_void};
use std::sync::Arc;

use cudarc::driver::{result, sys};

use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult, driver};
use crate::launch::{Dim3, KernelArgs};
use crate::nvrtc::{Arch, KernelImage};
use crate::stream::Stream;

/// A loaded module; unloaded when the last [`Module`] or [`Function`] of it is dropped.
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    raw: sys::CUmodule,
    device: CudaDevice,
    name: String,
}

// SAFETY: module handles are usable from any thread with their context current.
unsafe impl Send for ModuleInner {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: loaded once, unloaded once, after every function handle is gone.
            let _ = unsafe { result::module::unload(self.raw) };
        }
    }
}

impl Module {
    /// Loads `image` into `device`: the cubin when it was built for this exact architecture,
    /// else the PTX (the driver compiles it). An image for a newer architecture than the
    /// device's is an error.
    pub fn load(device: &CudaDevice, image: &KernelImage) -> CudaResult<Module> {
        let arch = Arch::new(device.compute_capability());
        if image.arch > arch {
            return Err(CudaError::Invalid(format!(
                "kernel image `{}` is for {} but cuda:{} is {arch}",
                image.name,
                image.arch,
                device.ordinal()
            )));
        }
        device.bind()?;
        let raw = if image.arch == arch && !image.cubin.is_empty() {
            // SAFETY: a cubin produced by NVRTC for this architecture.
            unsafe { result::module::load_data(image.cubin.as_ptr().cast()) }
        } else {
            let ptx = CString::new(image.ptx.clone()).map_err(|_| {
                CudaError::Invalid(format!("kernel image `{}`: PTX holds a NUL", image.name))
            })?;
            // SAFETY: NUL-terminated PTX text.
            unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
        }
        .map_err(driver("cuModuleLoadData"))?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw,
                device: device.clone(),
                name: image.name.clone(),
            }),
        })
    }

    /// The kernel `name` (an `extern "C"` symbol) of this module.
    pub fn function(&self, name: &str) -> CudaResult<Function> {
        let missing = || {
            CudaError::Invalid(format!(
                "module `{}` has no kernel `{name}`",
                self.inner.name
            ))
        };
        let cname = CString::new(name).map_err(|_| missing())?;
        self.inner.device.bind()?;
        // SAFETY: the module is loaded and stays so while the function lives.
        let raw = unsafe { result::module::get_function(self.inner.raw, cname) }
            .map_err(|_| missing())?;
        Ok(Function {
            raw,
            name: name.to_string(),
            module: self.clone(),
        })
    }
}

/// Most parameters [`Function::param_sizes`] reads.
const MAX_PARAMS: usize = 1024;

/// A kernel entry point; keeps its module loaded.
#[derive(Clone)]
pub struct Function {
    raw: sys::CUfunction,
    name: String,
    module: Module,
}

// SAFETY: function handles are immutable and usable from any thread with the context current.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Function {
    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The byte size of each parameter, as the driver describes the kernel; `None` where it
    /// cannot tell (`cuFuncGetParamInfo` is CUDA 12.4+).
    pub fn param_sizes(&self) -> Option<Vec<usize>> {
        self.module.inner.device.bind().ok()?;
        let mut sizes = Vec::new();
        while sizes.len() <= MAX_PARAMS {
            let (mut offset, mut size) = (0usize, 0usize);
            let index = sizes.len();
            // SAFETY: a loaded kernel; an index past its parameters is an error result. A
            // driver without the entry point makes cudarc panic: caught, and nothing is known.
            let query = std::panic::AssertUnwindSafe(|| unsafe {
                sys::cuFuncGetParamInfo(self.raw, index, &mut offset, &mut size)
            });
            let r = std::panic::catch_unwind(query).ok()?;
            if r != sys::CUresult::CUDA_SUCCESS {
                break;
            }
            sizes.push(size);
        }
        (!sizes.is_empty()).then_some(sizes)
    }

    /// Lets launches of this kernel take up to `bytes` of dynamic shared memory (above the
    /// 48 KiB every kernel may take; up to the device's opt-in limit).
    pub fn allow_shared(&self, bytes: u32) -> CudaResult<()> {
        self.module.inner.device.bind()?;
        let value = i32::try_from(bytes)
            .map_err(|_| CudaError::Invalid(format!("{bytes} bytes of shared memory")))?;
        // SAFETY: a loaded kernel with its context current.
        unsafe {
            result::function::set_function_attribute(
                self.raw,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                value,
            )
        }
        .map_err(driver("cuFuncSetAttribute"))
    }

    /// Blocks of `threads` threads with `shared_bytes` of dynamic shared memory that one
    /// multiprocessor keeps resident at once.
    pub fn resident_blocks_per_sm(&self, threads: u32, shared_bytes: u32) -> CudaResult<u32> {
        self.module.inner.device.bind()?;
        let threads = i32::try_from(threads)
            .map_err(|_| CudaError::Invalid(format!("{threads} threads per block")))?;
        // SAFETY: a loaded kernel with its context current.
        let n = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                self.raw,
                threads,
                shared_bytes as usize,
            )
        }
        .map_err(driver("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
        Ok(n.max(0) as u32)
    }

    /// Queues the kernel on `stream` with `params`, one pointer to each parameter's bytes.
    ///
    /// # Safety
    /// Each pointer must point to its parameter's bytes, in number, order and size as the
    /// kernel declares them, and every device pointer among them must stay valid until the
    /// kernel has run.
    pub unsafe fn launch_params(
        &self,
        stream: &Stream,
        grid: Dim3,
        block: Dim3,
        shared_bytes: u32,
        params: &mut [*mut c_void],
    ) -> CudaResult<()> {
        self.module.inner.device.bind()?;
        // SAFETY: per the function's contract; the stream belongs to this device.
        unsafe {
            result::launch_kernel(
                self.raw,
                grid,
                block,
                shared_bytes,
                stream.raw().cast(),
                params,
            )
        }
        .map_err(driver("cuLaunchKernel"))
    }

    /// Queues the kernel on `stream`.
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and size, and every device
    /// pointer among them must stay valid until the kernel has run.
    pub unsafe fn launch(
        &self,
        stream: &Stream,
        grid: Dim3,
        block: Dim3,
        shared_bytes: u32,
        args: &mut KernelArgs,
    ) -> CudaResult<()> {
        let mut params = args.pointers();
        // SAFETY: per the function's contract.
        unsafe { self.launch_params(stream, grid, block, shared_bytes, &mut params) }
    }
}
