//! The CUDA C programs of core layers, compiled once per device architecture and loaded
//! once per device. Images can be exported (to store in an engine) and installed (from a
//! deserialized engine) so that a deployment machine needs the driver only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::device::CudaDevice;
use crate::error::{CudaError, CudaResult};
use crate::module::{Function, Module};
use crate::nvrtc::{Arch, KernelImage, compile};

/// A program: a unique name and its CUDA C source (`extern "C"` kernels).
#[derive(Clone, Copy, Debug)]
pub struct ProgramSource {
    /// Unique name, e.g. `core_elementwise`.
    pub name: &'static str,
    /// CUDA C source.
    pub source: &'static str,
}

/// Compiled images and loaded modules of one device.
#[derive(Clone)]
pub struct Programs {
    device: CudaDevice,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    images: HashMap<String, KernelImage>,
    modules: HashMap<String, Module>,
    compiles: u64,
}

impl Programs {
    /// An empty cache for `device`.
    pub fn new(device: &CudaDevice) -> Programs {
        Programs {
            device: device.clone(),
            inner: Arc::default(),
        }
    }

    /// The entry point `entry` of `program`, compiling (NVRTC) and loading it on first use.
    pub fn function(&self, program: &ProgramSource, entry: &str) -> CudaResult<Function> {
        self.function_of(program.name, program.source, entry)
    }

    /// The entry point `entry` of the program stored as `name` (compiled from `source` on
    /// first use unless an image of that name was installed), loading it on first use.
    pub fn function_of(&self, name: &str, source: &str, entry: &str) -> CudaResult<Function> {
        let module = {
            let mut inner = self.inner.lock().map_err(|_| poisoned())?;
            match inner.modules.get(name) {
                Some(m) => m.clone(),
                None => {
                    let image = match inner.images.get(name) {
                        Some(i) => i.clone(),
                        None => {
                            let arch = Arch::new(self.device.compute_capability());
                            let i = compile(name, source, arch, &[])?;
                            inner.compiles += 1;
                            inner.images.insert(name.to_string(), i.clone());
                            i
                        }
                    };
                    let m = Module::load(&self.device, &image)?;
                    inner.modules.insert(name.to_string(), m.clone());
                    m
                }
            }
        };
        module.function(entry)
    }

    /// Every image compiled or installed so far.
    pub fn images(&self) -> Vec<KernelImage> {
        self.inner
            .lock()
            .map(|i| i.images.values().cloned().collect())
            .unwrap_or_default()
    }

    /// How many programs this cache has compiled with NVRTC (not counting installed ones).
    pub fn compiles(&self) -> u64 {
        self.inner.lock().map(|i| i.compiles).unwrap_or_default()
    }

    /// Makes `images` available, so their programs load without NVRTC.
    pub fn install(&self, images: impl IntoIterator<Item = KernelImage>) {
        if let Ok(mut inner) = self.inner.lock() {
            for i in images {
                inner.images.insert(i.name.clone(), i);
            }
        }
    }
}

fn poisoned() -> CudaError {
    CudaError::Invalid("the program cache lock was poisoned".into())
}
