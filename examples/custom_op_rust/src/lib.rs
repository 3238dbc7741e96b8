//! An out-of-tree torchtrt custom-op library written in Rust, exported as
//! `libtorchtrt_example_custom_op_rust.so`: one operator definition,
//! `com.example::HardSwishCustom`, from which the host derives the plugin
//! `com.example::HardSwishCustom@1` and the converter that maps the ONNX node onto it.

mod hard_swish;

use std::sync::Arc;

use torchtrt_plugin_api::CustomOp;

/// The custom ops this library exports.
fn custom_ops() -> Vec<Arc<dyn CustomOp>> {
    vec![Arc::new(hard_swish::HardSwishCustom)]
}

torchtrt_plugin_api::export_extension!(
    provider = concat!(
        "torchtrt_example_custom_op_rust ",
        env!("CARGO_PKG_VERSION")
    ),
    custom_ops = custom_ops
);
