//! Build options (`BuildConfig::tf32`) reach the backend's `prepare_with`, are stored in the
//! engine header's flags, and come back when the engine is loaded.

mod common;

use std::sync::{Arc, Mutex};

use common::fresh_registry;
use torchtrt_core::layers::{Activation, ActivationKind};
use torchtrt_core::plugin_api::{DType, DeviceKind};
use torchtrt_core::{
    Backend, BuildConfig, Dim, Engine, EngineLoader, InferInput, Kernel, LayerKind,
    NetworkDefinition, PrepareOptions, Tensor, build,
};

/// A CPU backend whose kernels copy their input, recording the options of every prepare.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<PrepareOptions>>,
}

struct Copy;

impl Kernel for Copy {
    fn execute(&self, inputs: &[&Tensor], outputs: &mut [Tensor]) -> Result<(), String> {
        outputs[0] = inputs[0].clone();
        Ok(())
    }
}

impl Backend for Recorder {
    fn device(&self) -> DeviceKind {
        DeviceKind::Cpu
    }
    fn name(&self) -> String {
        "recorder".into()
    }
    fn prepare(&self, _: &LayerKind, _: &[InferInput<'_>]) -> Result<Box<dyn Kernel>, String> {
        Err("prepare without options".into())
    }
    fn prepare_with(
        &self,
        _: &LayerKind,
        _: &[InferInput<'_>],
        options: &PrepareOptions,
    ) -> Result<Box<dyn Kernel>, String> {
        self.seen.lock().map_err(|e| e.to_string())?.push(*options);
        Ok(Box::new(Copy))
    }
}

fn engine(backend: Arc<Recorder>, tf32: bool) -> Engine {
    let mut net = NetworkDefinition::new();
    let x = net
        .add_input("x", DType::F32, &[Dim::Fixed(2), Dim::Fixed(3)])
        .unwrap();
    let kind = Activation {
        kind: ActivationKind::Relu,
    };
    let y = net.add("relu", kind, &[x]).unwrap();
    net.mark_output(y, "y").unwrap();
    let config = BuildConfig {
        tf32,
        fold_constants: false,
        ..BuildConfig::default()
    };
    build(&net, &config, &[backend]).unwrap()
}

#[test]
fn tf32_reaches_prepare_and_round_trips() {
    assert!(!BuildConfig::default().tf32, "TF32 must be opt-in");
    for tf32 in [false, true] {
        let builder = Arc::new(Recorder::default());
        let built = engine(builder.clone(), tf32);
        assert_eq!(built.plan().options.tf32, tf32);
        assert_eq!(*builder.seen.lock().unwrap(), [PrepareOptions { tf32 }]);
        let bytes = built.serialize();
        assert_eq!(bytes[40], u8::from(tf32), "header flags");

        let loader = Arc::new(Recorder::default());
        let reloaded = EngineLoader::with_registry(vec![loader.clone()], fresh_registry())
            .deserialize(&bytes)
            .unwrap();
        assert_eq!(reloaded.plan().options.tf32, tf32);
        assert_eq!(*loader.seen.lock().unwrap(), [PrepareOptions { tf32 }]);
        let summary = Engine::summarize_bytes(&bytes).unwrap().to_string();
        assert_eq!(summary.contains(", tf32)"), tf32, "{summary}");
    }
}

#[test]
fn unknown_header_flags_are_refused() {
    let mut bytes = engine(Arc::new(Recorder::default()), true).serialize();
    bytes[41] = 0x80;
    let err = EngineLoader::with_registry(vec![Arc::new(Recorder::default())], fresh_registry())
        .deserialize(&bytes)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("unknown header flags 0x8001"), "{err}");
}
