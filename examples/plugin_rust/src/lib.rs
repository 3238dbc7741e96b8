//! An out-of-tree torchtrt plugin library written in Rust: one plugin, `example::Swish@1`,
//! exported as `libtorchtrt_example_plugin_rust.so` through the C entry point
//! `torchtrt_extension_v1`, so any torchtrt host can load it.

mod swish;

use std::sync::Arc;

use torchtrt_plugin_api::PluginCreator;

/// The creators this library exports.
fn creators() -> Vec<Arc<dyn PluginCreator>> {
    vec![Arc::new(swish::SwishCreator)]
}

torchtrt_plugin_api::export_plugins!(
    provider = concat!("torchtrt_example_plugin_rust ", env!("CARGO_PKG_VERSION")),
    creators = creators
);
