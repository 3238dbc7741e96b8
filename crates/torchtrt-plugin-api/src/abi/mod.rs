//! The versioned C ABI between torchtrt hosts and extension libraries (see
//! `include/torchtrt_plugin.h` and `docs/plugin-abi.md`).
//!
//! A library exports one symbol, `torchtrt_extension_v1`, returning a [`TtrtExtension`]:
//! the ABI version (first, so any host can read it), the library's identity, and its plugin
//! creators as C function tables. Rust libraries build those tables with
//! [`export_plugins!`](crate::export_plugins); hosts read them back with [`Extension::load`],
//! which yields ordinary [`PluginCreator`](crate::PluginCreator)s.

mod desc;
mod dims;
mod export;
mod export_plugin;
mod fields;
mod host;
mod host_creator;
mod host_plugin;
mod ptr;
mod schema;
mod status;
mod types;

pub use export::{ExportedExtension, ExtensionCell, export_entry};
pub use host::{Extension, LoadError};
pub use host_creator::ForeignCreator;
pub use host_plugin::ForeignPlugin;
pub use types::*;
