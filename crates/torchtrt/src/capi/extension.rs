//! `ttrt_load_extension`: an extension library's plugins, converters and custom ops.

use std::ffi::c_char;

use torchtrt_capi::{TtrtRuntime, c_str, guard, reference};
use torchtrt_plugin_api::abi::TtrtStatus;

use crate::LoadOptions;

/// Loads an extension library with everything it exports: plugin creators, custom
/// converters for the ONNX importer, and custom ops (a derived plugin and converter each).
/// A nonzero `override_converters` lets its converters replace built-in ones.
///
/// # Safety
/// `runtime` is NULL or a live runtime; `path` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ttrt_load_extension(
    runtime: *mut TtrtRuntime,
    path: *const c_char,
    override_converters: i32,
) -> TtrtStatus {
    guard("ttrt_load_extension", || {
        // SAFETY: the caller's contract.
        let (_, path) = unsafe { (reference(runtime, "runtime")?, c_str(path, "path")?) };
        let options = LoadOptions {
            override_converters: override_converters != 0,
        };
        crate::load_extensions(path, &options)?;
        Ok(())
    })
}
