//! The versioned C ABI between torchtrt hosts and extension libraries (see
//! `include/torchtrt_plugin.h` and `docs/plugin-abi.md`).
//!
//! A library exports one symbol, `torchtrt_extension_v1`, returning a [`TtrtExtension`]:
//! the ABI version (first, so any host can read it), the library's identity, and its plugin
//! creators as C function tables. Rust libraries build those tables with
//! [`export_plugins!`](crate::export_plugins); hosts read them back with [`Extension::load`],
//! which yields ordinary [`PluginCreator`](crate::PluginCreator)s.

mod builder_foreign;
mod builder_host;
mod converter;
mod cuda_runtime;
mod custom_op;
mod desc;
mod dims;
mod elf;
mod export;
mod export_plugin;
mod ext_types;
mod fields;
mod host;
mod host_creator;
mod host_plugin;
mod ptr;
mod schema;
mod shape_values;
mod status;
mod types;

pub use converter::ForeignConverter;
pub use custom_op::ForeignCustomOp;
pub use export::{
    ExportedExtension, ExtensionCell, ExtensionParts, export_entry, export_parts_entry,
};
pub use ext_types::*;
pub use host::{Extension, LoadError};
pub use host_creator::ForeignCreator;
pub use host_plugin::ForeignPlugin;
pub use types::*;
