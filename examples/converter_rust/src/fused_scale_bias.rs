//! `com.example::FusedScaleBias(x; scale: float, bias: float = 0)` → `x · scale + bias`, as a
//! constant, a multiply and an add.

use torchtrt_plugin_api::{
    BinaryOp, Converter, ConverterNode, ConverterOp, DType, NetworkBuilder, PluginError,
    PluginResult, TensorDesc, TensorHandle,
};

/// The converter.
pub struct FusedScaleBias;

fn scalar(net: &mut dyn NetworkBuilder, dtype: DType, v: f32) -> PluginResult<TensorHandle> {
    if dtype != DType::F32 {
        return Err(PluginError::Unsupported(format!(
            "FusedScaleBias takes f32 inputs, got {dtype}"
        )));
    }
    net.add_constant(&TensorDesc::new(DType::F32, Vec::new()), &v.to_le_bytes())
}

impl Converter for FusedScaleBias {
    fn op(&self) -> ConverterOp {
        ConverterOp::new("com.example", "FusedScaleBias")
    }

    fn convert(
        &self,
        node: &ConverterNode,
        net: &mut dyn NetworkBuilder,
    ) -> PluginResult<Vec<TensorHandle>> {
        let scale = node.attributes.f32("scale").ok_or_else(|| {
            PluginError::InvalidInput("attribute `scale` (float) is required".into())
        })?;
        let bias = node.attributes.f32("bias").unwrap_or(0.0);
        let x = node.input(0)?;
        let dtype = net.tensor_desc(x)?.dtype;
        let s = scalar(net, dtype, scale)?;
        let b = scalar(net, dtype, bias)?;
        let scaled = net.add_binary(BinaryOp::Mul, x, s)?;
        Ok(vec![net.add_binary(BinaryOp::Add, scaled, b)?])
    }
}
