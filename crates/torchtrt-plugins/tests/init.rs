//! `torchtrt_plugins::init` registers every built-in creator exactly once per process,
//! whatever the number of calls and threads. (Its own test binary: the once-flag is
//! process-wide.)

use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};

use torchtrt_plugin_api::{PluginCreator, PluginKey, PluginResult, Registrar};
use torchtrt_plugins::{PROVIDER, init, register};

/// Records every registration.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(PluginKey, String)>>,
}

impl Registrar for Recorder {
    fn register_creator(
        &self,
        creator: Arc<dyn PluginCreator>,
        provider: &str,
    ) -> PluginResult<()> {
        let mut seen = self.seen.lock().expect("not poisoned");
        seen.push((creator.key(), provider.to_string()));
        Ok(())
    }
}

#[test]
fn init_registers_every_creator_once_from_many_threads() {
    let recorder = Arc::new(Recorder::default());
    let threads = 16;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (recorder, barrier) = (recorder.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (0..25).map(|_| init(recorder.as_ref())).collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for result in h.join().expect("thread finished") {
            assert_eq!(result, Ok(()));
        }
    }
    let seen = recorder.seen.lock().expect("not poisoned").clone();
    let expected: Vec<PluginKey> = register::creators().iter().map(|c| c.key()).collect();
    assert_eq!(seen.len(), expected.len(), "{seen:?}");
    let keys: HashSet<&PluginKey> = seen.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys.len(),
        expected.len(),
        "duplicate registration: {seen:?}"
    );
    assert!(expected.iter().all(|k| keys.contains(k)));
    assert!(seen.iter().all(|(_, p)| p == PROVIDER));

    let later = Recorder::default();
    assert_eq!(init(&later), Ok(()));
    assert!(later.seen.lock().expect("not poisoned").is_empty());
}

#[test]
fn provider_names_the_crate_and_version() {
    assert_eq!(
        PROVIDER,
        format!("torchtrt_plugins {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn the_built_in_set_is_the_design_table() {
    let mut keys: Vec<String> = register::creators()
        .iter()
        .map(|c| c.key().to_string())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "::CustomGeluPluginDynamic@1",
            "::InstanceNormalization_TRT@1",
            "torch_tensorrt::Interpolate@1",
            "torch_tensorrt::NonMaxSuppression@1",
            "torch_tensorrt::NormalizePlugin@1",
        ]
    );
}
