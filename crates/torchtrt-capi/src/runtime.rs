//! `TtrtRuntime`: create, destroy, load extension libraries, query the plugin registry.

use std::ffi::c_char;
use std::sync::Arc;

use torchtrt_core::{Backend, EngineLoader};
use torchtrt_cpu::CpuBackend;
use torchtrt_plugin_api::PluginKey;
use torchtrt_plugin_api::abi::TtrtStatus;

use crate::error::{CapiError, TTRT_RUNTIME_API_VERSION, guard};
use crate::ptr::{c_str, out_ptr, reference};

/// The object behind a `TtrtRuntime*`: a runtime over the CPU backend, the backend of every
/// CUDA device present, and the process-wide plugin registry.
pub struct TtrtRuntime {
    inner: EngineLoader,
}

impl TtrtRuntime {
    /// A runtime over the default backends; registers the built-in plugins when baked in.
    pub fn new() -> Result<TtrtRuntime, CapiError> {
        register_builtin_plugins()?;
        let mut backends: Vec<Arc<dyn Backend>> = vec![Arc::new(CpuBackend::new())];
        backends.extend(
            torchtrt_cuda::backends()
                .into_iter()
                .map(|b| b as Arc<dyn Backend>),
        );
        Ok(TtrtRuntime {
            inner: EngineLoader::new(backends),
        })
    }

    /// The core runtime.
    pub fn loader(&self) -> &EngineLoader {
        &self.inner
    }
}

#[cfg(feature = "builtin-plugins")]
fn register_builtin_plugins() -> Result<(), CapiError> {
    torchtrt_plugins::init(torchtrt_core::registry()).map_err(|e| {
        CapiError::from(torchtrt_core::Error::Plugin {
            context: format!("initialising {}", torchtrt_plugins::PROVIDER),
            source: e,
        })
    })
}

#[cfg(not(feature = "builtin-plugins"))]
fn register_builtin_plugins() -> Result<(), CapiError> {
    Ok(())
}

/// Library identity, e.g. `torchtrt-runtime 0.1.0`.
#[unsafe(no_mangle)]
pub extern "C" fn ttrt_version() -> *const c_char {
    concat!("torchtrt-runtime ", env!("CARGO_PKG_VERSION"), "\0")
        .as_ptr()
        .cast()
}

/// `TTRT_RUNTIME_API_VERSION` of this library.
#[unsafe(no_mangle)]
pub extern "C" fn ttrt_runtime_api_version() -> u32 {
    TTRT_RUNTIME_API_VERSION
}

/// 1 when the built-in plugins are baked in, 0 for the lean build.
#[unsafe(no_mangle)]
pub extern "C" fn ttrt_has_builtin_plugins() -> i32 {
    i32::from(cfg!(feature = "builtin-plugins"))
}

/// Allows (nonzero) or forbids (0, the default) loading engines that carry native CPU code
/// of kernel plugins, process-wide: loading such an engine runs its code, so allow it only
/// for engines as trusted as a plugin library.
#[unsafe(no_mangle)]
pub extern "C" fn ttrt_allow_engine_host_code(allowed: i32) {
    torchtrt_core::kernel_plugin::set_engine_host_code_allowed(allowed != 0);
}

/// Creates a runtime into `*out`.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_runtime_create(out: *mut *mut TtrtRuntime) -> TtrtStatus {
    guard("ttrt_runtime_create", || {
        // SAFETY: the caller's contract.
        let out = unsafe { out_ptr(out, "out") }?;
        *out = Box::into_raw(Box::new(TtrtRuntime::new()?));
        Ok(())
    })
}

/// Destroys a runtime; NULL is ignored.
///
/// # Safety
/// `runtime` is NULL or came from `ttrt_runtime_create` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_runtime_destroy(runtime: *mut TtrtRuntime) {
    if !runtime.is_null() {
        guard("ttrt_runtime_destroy", || {
            // SAFETY: the caller's contract.
            drop(unsafe { Box::from_raw(runtime) });
            Ok(())
        });
    }
}

/// Loads an extension library into the process-wide plugin registry.
///
/// # Safety
/// `runtime` is NULL or a live runtime; `path` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_runtime_load_library(
    runtime: *mut TtrtRuntime,
    path: *const c_char,
) -> TtrtStatus {
    guard("ttrt_runtime_load_library", || {
        // SAFETY: the caller's contract.
        let runtime = unsafe { reference(runtime, "runtime") }?;
        // SAFETY: the caller's contract.
        let path = unsafe { c_str(path, "path") }?;
        runtime.inner.registry().load_library(path)?;
        Ok(())
    })
}

/// Sets `*found` to 1 when `(plugin_namespace, name, version)` has a registered creator.
///
/// # Safety
/// Pointers NULL or valid as in `torchtrt_runtime.h`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_runtime_has_plugin(
    runtime: *const TtrtRuntime,
    plugin_namespace: *const c_char,
    name: *const c_char,
    version: *const c_char,
    found: *mut i32,
) -> TtrtStatus {
    guard("ttrt_runtime_has_plugin", || {
        // SAFETY: the caller's contract, for each pointer.
        let (runtime, namespace, name, version, found) = unsafe {
            (
                reference(runtime, "runtime")?,
                c_str(plugin_namespace, "plugin_namespace")?,
                c_str(name, "name")?,
                c_str(version, "version")?,
                out_ptr(found, "found")?,
            )
        };
        let key = PluginKey::new(namespace, name, version);
        *found = i32::from(runtime.inner.registry().get(&key).is_some());
        Ok(())
    })
}
