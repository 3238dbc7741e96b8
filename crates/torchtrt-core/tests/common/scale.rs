//! `test::Scale@1`: `y = x · scale + bias` on f32, the smallest useful plugin; it has a CPU
//! kernel only, so a CUDA engine runs it on the host with copies. Shared by the core and
//! CUDA tests.

use torchtrt_core::plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, FieldType, Launch, Plugin, PluginCreator,
    PluginError, PluginKey, PluginResult, PortDesc, ShapeExpr,
};

/// The plugin.
#[derive(Clone)]
pub struct ScalePlugin {
    /// Multiplier.
    pub scale: f32,
    /// Offset.
    pub bias: f32,
}

impl Plugin for ScalePlugin {
    fn num_outputs(&self) -> usize {
        1
    }
    fn output_dtypes(&self, inputs: &[DType]) -> PluginResult<Vec<DType>> {
        Ok(vec![inputs[0]])
    }
    fn output_shapes(&self, inputs: &[ShapeExpr]) -> PluginResult<Vec<ShapeExpr>> {
        match inputs {
            [x] => Ok(vec![x.clone()]),
            _ => Err(PluginError::InvalidInput("Scale takes one input".into())),
        }
    }
    fn supports(&self, pos: usize, io: &[PortDesc], _n: usize, device: DeviceKind) -> bool {
        device == DeviceKind::Cpu && io[pos].dtype == DType::F32
    }
    fn enqueue(&self, launch: Launch<'_, '_>) -> PluginResult<()> {
        let Launch::Cpu(l) = launch else {
            return Err(PluginError::Unsupported("Scale has no CUDA kernel".into()));
        };
        let x = l.inputs[0].typed::<f32>()?.to_vec();
        let y = l.outputs[0].typed_mut::<f32>()?;
        for (o, v) in y.iter_mut().zip(x) {
            *o = v * self.scale + self.bias;
        }
        Ok(())
    }
    fn fields_to_serialize(&self) -> FieldCollection {
        FieldCollection::new()
            .with("scale", self.scale)
            .with("bias", self.bias)
    }
    fn clone_plugin(&self) -> Box<dyn Plugin> {
        Box::new(self.clone())
    }
}

/// Its creator.
pub struct ScaleCreator;

impl PluginCreator for ScaleCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test", "Scale", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::required("scale", FieldType::F32, "multiplier").scalar(),
            FieldSpec::with_default("bias", 0.0f32, "offset").scalar(),
        ]
    }
    fn create(&self, _name: &str, fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(ScalePlugin {
            scale: fields.f32("scale").unwrap_or(1.0),
            bias: fields.f32("bias").unwrap_or(0.0),
        }))
    }
}
