#![allow(dead_code)]

pub mod scale;

use std::sync::Arc;

pub use scale::{ScaleCreator, ScalePlugin};
use torchtrt_core::layers::{InferInput, LayerKind};
use torchtrt_core::plugin_api::{
    DeviceKind, FieldCollection, FieldSpec, Plugin, PluginCreator, PluginKey, PluginResult,
};
use torchtrt_core::{Backend, Kernel, NetworkDefinition, PluginRegistry, TensorId};

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
