//! CUDA backends for hosts: one per device, shared by the process, with the CPU backend for
//! layers that have no CUDA kernel and, when baked in, the built-in plugin library's
//! compiled programs connected so that CUDA engines store and reinstall them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use torchtrt_core::Backend;
use torchtrt_cpu::CpuBackend;
use torchtrt_cuda::{CudaBackend, CudaResult, probe};

/// The backend of `cuda:ordinal`, created on first use and shared afterwards;
/// `Err(NoDevice)` without a GPU.
pub fn cuda_backend(ordinal: usize) -> CudaResult<Arc<CudaBackend>> {
    static BACKENDS: OnceLock<Mutex<HashMap<usize, Arc<CudaBackend>>>> = OnceLock::new();
    let mut map = BACKENDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(b) = map.get(&ordinal) {
        return Ok(b.clone());
    }
    let host: Arc<dyn Backend> = Arc::new(CpuBackend::new());
    let backend = CudaBackend::new(ordinal, host)?;
    #[cfg(feature = "builtin-plugins")]
    let backend = backend.with_image_source(Arc::new(plugin_images::PluginImages));
    let backend = Arc::new(backend);
    map.insert(ordinal, backend.clone());
    Ok(backend)
}

/// The backends of every CUDA device of this machine; empty without a GPU.
pub fn cuda_backends() -> Vec<Arc<CudaBackend>> {
    let count = probe::device_count().unwrap_or(0);
    (0..count).filter_map(|n| cuda_backend(n).ok()).collect()
}

#[cfg(feature = "builtin-plugins")]
mod plugin_images {
    use torchtrt_cuda::{Arch, KernelImage, KernelImageSource};

    /// The built-in plugin library's cubins (`torchtrt_plugins::cuda`).
    pub(super) struct PluginImages;

    impl KernelImageSource for PluginImages {
        fn name(&self) -> &str {
            "plugins"
        }

        fn export(&self, arch: Arch) -> Vec<KernelImage> {
            torchtrt_plugins::cuda::kernel_images()
                .into_iter()
                .filter(|i| Arch::new(i.arch) == arch)
                .map(|i| KernelImage {
                    name: i.program,
                    arch,
                    ptx: Vec::new(),
                    cubin: i.cubin,
                })
                .collect()
        }

        fn install(&self, images: Vec<KernelImage>) -> Result<(), String> {
            let list = images
                .into_iter()
                .map(|i| {
                    if i.cubin.is_empty() {
                        return Err(format!("plugin program `{}` has no cubin", i.name));
                    }
                    Ok(torchtrt_plugins::cuda::KernelImage {
                        program: i.name,
                        arch: (i.arch.major, i.arch.minor),
                        cubin: i.cubin,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            torchtrt_plugins::cuda::install_kernel_images(list);
            Ok(())
        }
    }
}
