//! Backend blobs (e.g. compiled GPU programs) travel in the engine file: the backend that
//! built the engine stores them, the backend that loads it receives them before its kernels
//! are prepared, and they survive a second serialization.

mod common;

use std::sync::{Arc, Mutex};

use common::{ScaleCreator, add_scale, fresh_registry};
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, EngineBlob, EngineLoader, InferInput, Kernel, LayerKind,
    NetworkDefinition, OnDuplicate, PluginRegistry, build,
};

/// A kernel-less CPU backend with blobs to store and a record of the blobs it received.
#[derive(Default)]
struct BlobBackend {
    stores: Vec<EngineBlob>,
    received: Mutex<Vec<EngineBlob>>,
    refuse: bool,
}

impl Backend for BlobBackend {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn name(&self) -> String {
        "blobs".into()
    }
    fn prepare(&self, layer: &LayerKind, _: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
        Err(format!("no kernel for {}", layer.op().kind()))
    }
    fn engine_blobs(&self) -> Vec<EngineBlob> {
        self.stores.clone()
    }
    fn install_blobs(&self, blobs: &[EngineBlob]) -> Result<(), String> {
        if self.refuse {
            return Err("blob `b/one` is for another device".into());
        }
        self.received.lock().unwrap().extend_from_slice(blobs);
        Ok(())
    }
}

fn blob(name: &str, seed: u8) -> EngineBlob {
    EngineBlob {
        name: name.into(),
        data: (0..300u16).map(|i| (i as u8).wrapping_mul(seed)).collect(),
    }
}

fn registry() -> &'static PluginRegistry {
    let r = fresh_registry();
    r.register(Arc::new(ScaleCreator), "tests 1.0", OnDuplicate::Error)
        .unwrap();
    r
}

fn engine(registry: &PluginRegistry, backend: Arc<dyn Backend>) -> Engine {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input(
            "x",
            DType::F32,
            &[Dim::dynamic("n", 1, 2, 4), Dim::Fixed(3)],
        )
        .unwrap();
    let y = add_scale(&mut net, registry, "scale", x, 2.0, 1.0);
    net.mark_output(y, "y").unwrap();
    build(&net, &BuildConfig::default(), &[backend]).unwrap()
}

#[test]
fn blobs_are_stored_installed_and_kept() {
    let registry = registry();
    let stored = vec![blob("b/two", 7), blob("b/one", 3)];
    let builder = Arc::new(BlobBackend {
        stores: stored.clone(),
        ..BlobBackend::default()
    });
    let bytes = engine(registry, builder).serialize();

    let loader = Arc::new(BlobBackend::default());
    let runtime = EngineLoader::with_registry(vec![loader.clone()], registry);
    let reloaded = runtime.deserialize(&bytes).unwrap();
    let mut want = stored.clone();
    want.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(*loader.received.lock().unwrap(), want);
    assert_eq!(reloaded.blobs(), want);

    let again = Arc::new(BlobBackend::default());
    EngineLoader::with_registry(vec![again.clone()], registry)
        .deserialize(&reloaded.serialize())
        .unwrap();
    assert_eq!(*again.received.lock().unwrap(), want);

    let summary = Engine::summarize_bytes(&bytes).unwrap();
    assert_eq!(
        summary.blobs,
        vec![("b/one".to_string(), 300), ("b/two".to_string(), 300)]
    );
    assert!(summary.to_string().contains("b/one (300 bytes)"));
}

#[test]
fn a_backend_refusing_blobs_is_a_clear_error() {
    let registry = registry();
    let builder = Arc::new(BlobBackend {
        stores: vec![blob("b/one", 3)],
        ..BlobBackend::default()
    });
    let bytes = engine(registry, builder).serialize();
    let refusing = Arc::new(BlobBackend {
        refuse: true,
        ..BlobBackend::default()
    });
    let err = EngineLoader::with_registry(vec![refusing], registry)
        .deserialize(&bytes)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("blobs backend cannot use the engine's stored blobs"),
        "{err}"
    );
    assert!(err.contains("b/one"), "{err}");
}
