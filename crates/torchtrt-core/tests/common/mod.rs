#![allow(dead_code)]

use std::sync::Arc;

use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_core::plugin_api::{
    DType, DeviceKind, FieldCollection, FieldSpec, Launch, Plugin, PluginCreator, PluginError,
    PluginKey, PluginResult, PortDesc, ShapeExpr,
};
use torchtrt_core::{Backend, Kernel, NetworkDefinition, PluginRegistry, TensorId};

/// `y = x · scale + bias` on f32, the smallest useful plugin.
#[derive(Clone)]
pub struct ScalePlugin {
    pub scale: f32,
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
            return Err(PluginError::Unsupported("cuda".into()));
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

/// Creator for [`ScalePlugin`] under `test::Scale@1`.
pub struct ScaleCreator;

impl PluginCreator for ScaleCreator {
    fn key(&self) -> PluginKey {
        PluginKey::new("test", "Scale", "1")
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        vec![
            FieldSpec::required(
                "scale",
                torchtrt_core::plugin_api::FieldType::F32,
                "multiplier",
            )
            .scalar(),
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

/// A creator with an arbitrary key, for registry tests.
pub struct NamedCreator(pub PluginKey);

impl PluginCreator for NamedCreator {
    fn key(&self) -> PluginKey {
        self.0.clone()
    }
    fn field_schema(&self) -> Vec<FieldSpec> {
        Vec::new()
    }
    fn create(&self, _name: &str, _fields: &FieldCollection) -> PluginResult<Box<dyn Plugin>> {
        Ok(Box::new(ScalePlugin {
            scale: 1.0,
            bias: 0.0,
        }))
    }
}

/// A CPU backend without kernels: networks of constants and plugins need none.
pub struct NullBackend;

impl Backend for NullBackend {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn name(&self) -> String {
        "null".into()
    }
    fn prepare(&self, layer: &LayerKind, _: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
        Err(format!("no kernel for {}", layer.op().kind()))
    }
}

pub fn backends() -> Vec<Arc<dyn Backend>> {
    vec![Arc::new(NullBackend)]
}

/// A registry of its own for one test, living for the rest of the process.
pub fn fresh_registry() -> &'static PluginRegistry {
    Box::leak(Box::new(PluginRegistry::new()))
}

/// Adds a `test::Scale` plugin layer.
pub fn add_scale(
    net: &mut NetworkDefinition,
    registry: &PluginRegistry,
    name: &str,
    input: TensorId,
    scale: f32,
    bias: f32,
) -> TensorId {
    let fields = FieldCollection::new()
        .with("scale", scale)
        .with("bias", bias);
    net.add_plugin(name, registry, &ScaleCreator.key(), &fields, &[input])
        .expect("add Scale")[0]
}

/// Deterministic pseudo-random f32 values in [-1, 1).
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
