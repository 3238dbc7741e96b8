//! An out-of-tree torchtrt custom-converter library written in Rust, exported as
//! `libtorchtrt_example_converter_rust.so` through the C entry point `torchtrt_extension_v1`:
//!
//! - `com.example::FusedScaleBias(x; scale, bias)` → `x · scale + bias` from core layers;
//! - `com.example::FastGelu(x)` → the built-in plugin `::CustomGeluPluginDynamic@1` (tanh form);
//! - `com.example::Panic(x)` → panics, to show that the host catches it.

mod fast_gelu;
mod fused_scale_bias;
mod panic;

use std::sync::Arc;

use torchtrt_plugin_api::Converter;

/// The converters this library exports.
fn converters() -> Vec<Arc<dyn Converter>> {
    vec![
        Arc::new(fused_scale_bias::FusedScaleBias),
        Arc::new(fast_gelu::FastGelu),
        Arc::new(panic::Panic),
    ]
}

torchtrt_plugin_api::export_extension!(
    provider = concat!(
        "torchtrt_example_converter_rust ",
        env!("CARGO_PKG_VERSION")
    ),
    converters = converters
);
