//! `com.example::FastGelu(x)` → the built-in plugin `::CustomGeluPluginDynamic@1` with
//! `approximate = "tanh"`: a converter that emits a plugin layer.

use torchtrt_plugin_api::{
    Converter, ConverterNode, ConverterOp, FieldCollection, NetworkBuilder, PluginKey,
    PluginResult, TensorHandle,
};

/// The converter.
pub struct FastGelu;

impl Converter for FastGelu {
    fn op(&self) -> ConverterOp {
        ConverterOp::new("com.example", "FastGelu")
    }

    fn convert(
        &self,
        node: &ConverterNode,
        net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>> {
        let key = PluginKey::new("", "CustomGeluPluginDynamic", "1");
        let fields = FieldCollection::new().with("approximate", "tanh");
        net.add_plugin(&key, &fields, &[node.input(0)?])
    }
}
