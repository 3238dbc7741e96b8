//! The stable contract between torchtrt and the authors of plugins, converters and custom
//! ops: dtypes and tensor descriptions, symbolic shapes, typed fields, the [`Plugin`] and
//! [`PluginCreator`] traits, and the versioned C ABI that lets a shared library written in
//! Rust or C hand its creators to a host.
//!
//! A Rust plugin library implements the traits and exports them with [`export_plugins!`];
//! a C library fills the tables declared in `include/torchtrt_plugin.h`. Either way a host
//! loads it with `PluginRegistry::load_library` and sees `dyn PluginCreator`s.

#![allow(
    clippy::result_large_err,
    reason = "errors carry the plugin key and field by value; they are the cold path"
)]

pub mod abi;
mod capabilities;
mod converter;
pub mod cuda_c;
mod cuda_runtime;
mod custom_op;
mod dims;
mod dtype;
mod error;
mod field;
mod plugin;
mod shape_values;
mod sized_output;
mod tactic;

pub use capabilities::{
    CAPABILITY_ALIASED_OUTPUTS, CAPABILITY_SHAPE_INPUTS, CAPABILITY_SIZED_OUTPUTS,
    CAPABILITY_TACTICS, Capabilities,
};
pub use converter::{
    BinaryOp, Converter, ConverterNode, ConverterOp, NetworkBuilder, TensorHandle, UnaryOp,
};
pub use cuda_runtime::{CudaProgram, CudaRuntime, KernelLaunch, NoCudaRuntime};
pub use custom_op::{CUSTOM_OP_VERSION, CustomOp, CustomOpCreator, custom_op_key};
pub use dims::{
    DimError, DimExpr, DimOp, ShapeExpr, UNKNOWN_DIM, const_shape, format_shape, shape_of_sizes,
    shape_values,
};
pub use dtype::{
    DType, DeviceKind, Element, PortDesc, ShapeDisplay, TensorDesc, TensorFormat, numel,
};
pub use error::{PluginError, PluginResult};
pub use field::{Field, FieldCollection, FieldSpec, FieldType, FieldValue, validate_fields};
pub use plugin::{
    CpuLaunch, CudaLaunch, DeviceTensor, HostTensor, HostTensorMut, Launch, Plugin, PluginCreator,
    PluginKey, Registrar, create_plugin,
};
pub use shape_values::{MAX_SHAPE_VALUES, ShapeValues};
pub use sized_output::SizedOutput;
pub use tactic::Tactic;

pub use half::{bf16, f16};
