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
        self.module.inner.device.bind()?;
        let mut params = args.pointers();
        // SAFETY: per the function's contract; the stream belongs to this device.
        unsafe {
            result::launch_kernel(
                self.raw,
                grid,
                block,
                shared_bytes,
                stream.raw().cast(),
                &mut params,
            )
        }
        .map_err(driver("cuLaunchKernel"))
    }
}
