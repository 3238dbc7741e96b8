//! Kernel plugins: plugins declared by a spec file (TOML) instead of a compiled library —
//! namespace, name, version, typed fields, inputs and outputs with shape expressions, the
//! dtypes they take, and kernels as C (compiled for the CPU by the system C compiler when the
//! spec is loaded) and CUDA C (compiled by NVRTC when an engine is built). Engines carry the
//! spec, its sources and the compiled CPU object ([`KernelPackage`]), so deserializing them
//! needs no library. `docs/plugins.md` describes the format; [`SpecBuilder`] writes a spec
//! in Rust.

mod builder;
mod cpu;
mod expr;
mod package;
mod plugin;
mod spec;

pub use builder::{Device, KernelDef, SpecBuilder};
pub use cpu::{MAX_OBJECT_BYTES, compiler};
pub(crate) use package::from_blob;
pub use package::{
    BLOB_PREFIX, KernelPackage, engine_host_code_allowed, load_spec, load_spec_text,
    set_engine_host_code_allowed,
};
pub use plugin::KernelPluginCreator;
pub use spec::{DeviceSpec, FieldDef, Kernel, KernelSpec, Port, PortType, SourceFiles};
