//! A registrar that refuses a creator makes `init` fail, and every later call returns that
//! first result without registering again. (Its own test binary: the once-flag is
//! process-wide.)

use std::sync::{Arc, Mutex};

use torchtrt_plugin_api::{PluginCreator, PluginError, PluginResult, Registrar};
use torchtrt_plugins::init;

/// Accepts the first creator, refuses the rest.
#[derive(Default)]
struct Picky {
    calls: Mutex<usize>,
}

impl Registrar for Picky {
    fn register_creator(
        &self,
        creator: Arc<dyn PluginCreator>,
        provider: &str,
    ) -> PluginResult<()> {
        let mut calls = self.calls.lock().expect("not poisoned");
        *calls += 1;
        if *calls == 1 {
            Ok(())
        } else {
            Err(PluginError::Registration(format!(
                "{} is taken (asked by {provider})",
                creator.key()
            )))
        }
    }
}

#[test]
fn the_first_result_is_kept() {
    let picky = Picky::default();
    let first = init(&picky);
    assert!(
        matches!(first, Err(PluginError::Registration(_))),
        "{first:?}"
    );
    assert_eq!(*picky.calls.lock().expect("not poisoned"), 2);
    for _ in 0..3 {
        assert_eq!(init(&picky), first);
    }
    assert_eq!(*picky.calls.lock().expect("not poisoned"), 2);
}
