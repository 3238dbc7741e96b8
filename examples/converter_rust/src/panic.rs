//! `com.example::Panic(x)`: a converter that panics, which the library's entry point turns
//! into an error status instead of unwinding into the host.

use torchtrt_plugin_api::{
    Converter, ConverterNode, ConverterOp, NetworkBuilder, PluginResult, TensorHandle,
};

/// The converter.
pub struct Panic;

impl Converter for Panic {
    fn op(&self) -> ConverterOp {
        ConverterOp::new("com.example", "Panic")
    }

    fn convert(
        &self,
        node: &ConverterNode,
        _net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>> {
        panic!("com.example::Panic converts nothing (node `{}`)", node.name)
    }
}
