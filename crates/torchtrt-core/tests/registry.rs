mod common;

use std::sync::Arc;

use common::{NamedCreator, ScaleCreator, fresh_registry};
use torchtrt_core::plugin_api::{FieldCollection, PluginKey, Registrar};
use torchtrt_core::{Error, OnDuplicate, PluginRegistry};

fn key(ns: &str, name: &str, v: &str) -> PluginKey {
    PluginKey::new(ns, name, v)
}

#[test]
fn register_get_list_deregister() {
    let r = PluginRegistry::new();
    r.register(Arc::new(ScaleCreator), "tests", OnDuplicate::Error)
        .unwrap();
    r.register(
        Arc::new(NamedCreator(key("", "A", "1"))),
        "tests",
        OnDuplicate::Error,
    )
    .unwrap();
    r.register(
        Arc::new(NamedCreator(key("", "A", "2"))),
        "tests",
        OnDuplicate::Error,
    )
    .unwrap();
    assert_eq!(r.len(), 3);
    assert!(r.get(&key("test", "Scale", "1")).is_some());
    assert!(r.get(&key("test", "Scale", "2")).is_none());
    assert!(r.get(&key("other", "Scale", "1")).is_none());
    let list = r.creators();
    let keys: Vec<String> = list.iter().map(|c| c.key.to_string()).collect();
    assert_eq!(keys, ["::A@1", "::A@2", "test::Scale@1"]);
    assert_eq!(list[2].fields.len(), 2);
    assert_eq!(list[2].provider, "tests");
    assert!(list[2].library.is_none());
    r.deregister(&key("", "A", "1")).unwrap();
    assert!(r.get(&key("", "A", "1")).is_none());
    assert!(matches!(
        r.deregister(&key("", "A", "1")),
        Err(Error::Registry(_))
    ));
    assert_eq!(r.len(), 2);
}

#[test]
fn duplicate_key_refused_unless_replace_or_skip() {
    let r = PluginRegistry::new();
    let k = key("ns", "P", "1");
    r.register(
        Arc::new(NamedCreator(k.clone())),
        "first",
        OnDuplicate::Error,
    )
    .unwrap();
    let err = r
        .register(
            Arc::new(NamedCreator(k.clone())),
            "second",
            OnDuplicate::Error,
        )
        .unwrap_err();
    assert!(err.to_string().contains("ns::P@1"), "{err}");
    assert!(err.to_string().contains("first"), "{err}");
    r.register(
        Arc::new(NamedCreator(k.clone())),
        "second",
        OnDuplicate::Skip,
    )
    .unwrap();
    assert_eq!(r.entry(&k).unwrap().provider, "first");
    r.register(
        Arc::new(NamedCreator(k.clone())),
        "second",
        OnDuplicate::Replace,
    )
    .unwrap();
    assert_eq!(r.entry(&k).unwrap().provider, "second");
    assert_eq!(r.len(), 1);
}

#[test]
fn batch_registration_is_atomic() {
    let r = PluginRegistry::new();
    r.register(
        Arc::new(NamedCreator(key("", "Taken", "1"))),
        "owner",
        OnDuplicate::Error,
    )
    .unwrap();
    let batch: Vec<Arc<dyn torchtrt_core::plugin_api::PluginCreator>> = vec![
        Arc::new(NamedCreator(key("", "New", "1"))),
        Arc::new(NamedCreator(key("", "Taken", "1"))),
    ];
    let err = r.register_all(batch, "intruder", None).unwrap_err();
    assert!(err.to_string().contains("::Taken@1"), "{err}");
    assert!(
        r.get(&key("", "New", "1")).is_none(),
        "nothing half-registered"
    );
    assert_eq!(r.len(), 1);
    let same: Vec<Arc<dyn torchtrt_core::plugin_api::PluginCreator>> = vec![
        Arc::new(NamedCreator(key("", "Taken", "1"))),
        Arc::new(NamedCreator(key("", "Other", "1"))),
    ];
    let added = r.register_all(same, "owner", None).unwrap();
    assert_eq!(
        added,
        vec![key("", "Other", "1")],
        "same provider: existing key skipped"
    );
}

#[test]
fn registrar_skips_same_provider_and_refuses_others() {
    let r = PluginRegistry::new();
    r.register_creator(Arc::new(ScaleCreator), "lib 1.0")
        .unwrap();
    r.register_creator(Arc::new(ScaleCreator), "lib 1.0")
        .unwrap();
    assert!(r.register_creator(Arc::new(ScaleCreator), "other").is_err());
    assert_eq!(r.len(), 1);
}

#[test]
fn concurrent_registration_and_lookup() {
    let r: &'static PluginRegistry = fresh_registry();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..200 {
                    let k = key("conc", &format!("P{t}_{i}"), "1");
                    r.register(Arc::new(NamedCreator(k.clone())), "t", OnDuplicate::Error)
                        .unwrap();
                    assert!(r.get(&k).is_some());
                    let shared = key("conc", "Shared", "1");
                    let _ = r.register(
                        Arc::new(NamedCreator(shared.clone())),
                        "t",
                        OnDuplicate::Skip,
                    );
                    assert!(r.get(&shared).is_some());
                    let _ = r.creators().len();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(r.len(), 8 * 200 + 1);
}

#[test]
fn create_validates_fields_and_names_the_layer() {
    let r = PluginRegistry::new();
    r.register(Arc::new(ScaleCreator), "tests", OnDuplicate::Error)
        .unwrap();
    let k = key("test", "Scale", "1");
    let err = r
        .create(&k, "my_layer", &FieldCollection::new())
        .err()
        .expect("error")
        .to_string();
    assert!(
        err.contains("my_layer") && err.contains("scale") && err.contains("test::Scale@1"),
        "{err}"
    );
    let missing = r
        .create(&key("x", "Nope", "3"), "l", &FieldCollection::new())
        .err()
        .expect("error");
    assert!(matches!(missing, Error::PluginNotFound { ref name, .. } if name == "Nope"));
}
