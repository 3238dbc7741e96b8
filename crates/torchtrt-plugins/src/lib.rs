//! torchtrt's built-in plugin library, built both as an `rlib` (baked into `libtorchtrt.so`
//! and `libtorchtrt_runtime.so`) and as `libtorchtrt_plugins.so`, which any host loads like
//! a third-party plugin library.
//!
//! | namespace | name | version | module |
//! |---|---|---|---|
//! | `torch_tensorrt` | `Interpolate` | 1 | [`interpolate`] |
//! | `torch_tensorrt` | `NormalizePlugin` | 1 | [`normalize`] |
//! | `""` | `InstanceNormalization_TRT` | 1 | [`instance_norm`] |
//! | `""` | `CustomGeluPluginDynamic` | 1 | [`gelu`] |
//!
//! Hosts that link the crate call [`init`] with their registry; it registers every creator
//! of [`register::creators`] once per process, however often and from however many threads
//! it is called. Hosts that load the `.so` call its `torchtrt_extension_v1` entry point,
//! which hands out the same creators under the same provider name ([`PROVIDER`]). The
//! crate's `README.md` lists the fields of every plugin.

use std::sync::OnceLock;

use torchtrt_plugin_api::{PluginResult, Registrar};

pub mod cuda;
pub mod gelu;
pub mod instance_norm;
pub mod interpolate;
mod kernels;
pub mod nms;
pub mod normalize;
pub mod register;
mod support;

/// The provider name the creators are registered under: `torchtrt_plugins <version>`.
pub const PROVIDER: &str = concat!("torchtrt_plugins ", env!("CARGO_PKG_VERSION"));

/// Registers every built-in creator with `registrar` in one batch
/// ([`Registrar::register_creators`], all or none where the registry supports it), exactly
/// once per process. Later and concurrent calls wait for the first to finish and return its
/// result without registering anything again.
pub fn init(registrar: &dyn Registrar) -> PluginResult<()> {
    static DONE: OnceLock<PluginResult<()>> = OnceLock::new();
    DONE.get_or_init(|| registrar.register_creators(register::creators(), PROVIDER))
        .clone()
}

torchtrt_plugin_api::export_plugins!(provider = PROVIDER, creators = register::creators);
